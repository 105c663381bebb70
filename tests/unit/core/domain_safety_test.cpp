// The one predicate for a domain-type change (core/domain_safety): the planner's skips and the
// transaction's preflight refuse the same changes in the same words, in one order.
#include "core/domain_safety.hpp"

#include <gtest/gtest.h>

#include "config/policy_loader.hpp"
#include "core/domain_change.hpp"
#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace domain_safety_test {

using namespace iommud;
using namespace iommud::testing;
using core::DomainRefusal;
using core::DomainType;

std::string rule(const std::string& domain, const std::string& match) {
  const std::string accept = domain == "identity" ? "accept = [\"no-isolation\"]\n"
                             : domain == "DMA-FQ" ? "accept = [\"lazy-invalidation\"]\n"
                                                  : "";
  return "[[rule]]\nname = \"r\"\ndescription = \"d\"\nwhen = \"always\"\ndomain = \"" + domain + "\"\n" + accept +
         "[rule.match]\n" + match + "\n";
}

struct Case {
  const char* name;
  std::unique_ptr<FakeHost> host;
  std::string match;
  DomainType to;
  DomainRefusal refusal;
  core::SkipReason skip;
};

TEST(DomainSafety, ThePlannerAndThePreflightRefuseInTheSameWords) {
  Case cases[] = {
      {"vfio-pci", vfioGroup(), "driver = \"vfio-pci\"", DomainType::Dma, DomainRefusal::NeverUnbind,
       core::SkipReason::NeverUnbind},
      {"untrusted", thunderboltNic(), "untrusted = true", DomainType::Identity, DomainRefusal::Untrusted,
       core::SkipReason::Untrusted},
      {"in use", intelBareMetal(), "kind = \"nvme\"", DomainType::Identity, DomainRefusal::InUse,
       core::SkipReason::InUse},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto s = statusOf(*c.host);
    core::PlanOptions o;
    o.trigger = core::Trigger::Hotplug;
    auto plan = core::plan({s.host, s.mode, s.findings}, rules(rule(std::string(toString(c.to)), c.match)), o);
    auto skip = std::find_if(plan.skips.begin(), plan.skips.end(),
                             [&](const core::Skip& k) { return k.kind == core::ChangeKind::Domain; });
    ASSERT_NE(skip, plan.skips.end());
    EXPECT_EQ(skip->reason, c.skip);
    const int group = std::stoi(skip->object.substr(std::string("group ").size()));
    const auto* g = s.host.group(group);
    ASSERT_NE(g, nullptr);
    auto verdict = core::judgeDomainChange(s.host, *g, c.to);
    EXPECT_EQ(verdict.refusal, c.refusal);
    auto prepared = core::prepareDomainChange(s.host, group, c.to);
    ASSERT_FALSE(prepared.ok());
    EXPECT_EQ(prepared.error().message, skip->message);
    EXPECT_EQ(verdict.message, skip->message);
  }
}

// Untrusted comes before what the kernel would say, and the kernel's rules before being in use:
// the refusal a person reads is the one no change of circumstances would lift first.
TEST(DomainSafety, UntrustedIsSaidBeforeTheKernelsRulesAndThoseBeforeBeingInUse) {
  auto s = statusOf(*externalPortGuest());
  const auto* d = s.host.device("0000:06:00.0");
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->group);
  auto facts = s.host;
  facts.device("0000:06:00.0")->inUse.push_back({core::InUseReason::Kind::NetRoute, "enp6s0 is up and carries routes"});
  for (auto to : {DomainType::Identity, DomainType::DmaFq}) {
    auto v = core::judgeDomainChange(facts, *facts.group(*d->group), to);
    EXPECT_EQ(v.refusal, DomainRefusal::Untrusted) << toString(to);
    EXPECT_EQ(v.device, facts.device("0000:06:00.0"));
  }
  // Before 6.4 a group of several devices cannot change at all: that, not the use, is said.
  for (const auto& [release, refusal] :
       {std::pair{"6.1.140-1", DomainRefusal::KernelRule}, std::pair{"6.12.48-1", DomainRefusal::InUse}}) {
    auto two = statusOf(*twoNvmeOneGroup(release)).host;
    two.device("0000:03:00.0")->inUse.push_back({core::InUseReason::Kind::Mounted, "nvme0n1 is mounted at /srv"});
    auto v = core::judgeDomainChange(two, *two.group(20), DomainType::Identity);
    EXPECT_EQ(v.refusal, refusal) << release << ": " << v.message;
  }
}

}  // namespace domain_safety_test
