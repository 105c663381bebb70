#include "core/plan/domain_decision.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace domain_decision_test {

using namespace iommud;
using namespace iommud::testing;
using core::planning::tradeOffOf;

TEST(DomainDecision, NamesWhatIdentityGivesUpAsAHighRisk) {
  auto t = tradeOffOf(core::DomainType::Identity, "group 14", "nvme0, nvme1");
  EXPECT_EQ(t.risk, core::Risk::High);
  EXPECT_EQ(t.text,
            "group 14 (nvme0, nvme1) set to identity: these devices can DMA to all memory; a faulty or compromised "
            "device or its firmware is no longer contained");
}

TEST(DomainDecision, NamesTheFlushWindowOfLazyInvalidationAsAMediumRisk) {
  auto t = tradeOffOf(core::DomainType::DmaFq, "group 3", "enp5s0");
  EXPECT_EQ(t.risk, core::Risk::Medium);
  EXPECT_NE(t.text.find("group 3 (enp5s0) set to DMA-FQ: unmapped buffers stay reachable"), std::string::npos)
      << t.text;
}

TEST(DomainDecision, StrictTranslationIsProtectionGainedWithoutRisk) {
  auto t = tradeOffOf(core::DomainType::Dma, "group 3", "enp5s0");
  EXPECT_EQ(t.risk, core::Risk::None);
  EXPECT_NE(t.text.find("set to DMA: strict translation"), std::string::npos) << t.text;
}

// The decision on its own: a group both of whose endpoints a rule covers, without acceptance.
TEST(DomainDecision, RefusesPerRuleWhatARuleDoesNotAccept) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto policy = rules(kNvmeIdentityNotAccepted);
  core::PlanInput in{s.host, s.mode, s.findings};
  std::vector<core::planning::GroupCtx> groups;
  const core::Group* g = s.host.group(20);
  ASSERT_NE(g, nullptr);
  groups.push_back(core::planning::groupContext(*g, [&](const std::string& a) { return s.host.device(a); }));
  std::vector<core::planning::DeviceCtx> devices;
  for (const auto& d : s.host.devices) {
    devices.push_back(core::planning::deviceContext(d, d.group == 20 ? &groups.front() : nullptr));
    if (d.group == 20) devices.back().domainRule = &policy.rules.front();
  }
  core::PlanOptions options;
  options.trigger = core::Trigger::Hotplug;
  core::planning::Recorder out{options, {}};
  core::planning::planDomains(in, devices, out);
  EXPECT_TRUE(out.plan.changes.empty());
  ASSERT_EQ(out.plan.skips.size(), 1U);
  EXPECT_EQ(out.plan.skips[0].reason, core::SkipReason::NeedsAcceptance);
  EXPECT_EQ(out.plan.skips[0].object, "group 20");
}

}  // namespace domain_decision_test
