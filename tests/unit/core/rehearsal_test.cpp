// The rehearsal (core/rehearsal, `iommuctl apply --simulate`): a plan judged by the rules of the
// host's kernel version, as the transaction's preflight judges it, with nothing written.
#include "core/rehearsal.hpp"

#include <gtest/gtest.h>

#include <cerrno>

#include "app/report/plan_report.hpp"
#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace rehearsal_test {

using namespace iommud;
using namespace iommud::testing;
using core::Rehearsed;
using V = core::Rehearsed::Verdict;

constexpr const char* kUntrustedIdentity = R"(
[[rule]]
name = "tb-identity"
description = "identity for the Thunderbolt NIC"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
driver = "atlantic"
)";

struct Run {
  app::Status status;
  core::Rehearsal rehearsal;
  std::string text;
};

Run rehearse(const FakeHost& host, const std::string& toml) {
  Run r{statusOf(host), {}, {}};
  core::PlanOptions o;
  o.trigger = core::Trigger::Hotplug;
  auto plan = core::plan({r.status.host, r.status.mode, r.status.findings}, rules(toml), o);
  r.rehearsal = core::rehearse(plan, r.status.host);
  // Lines joined, as the prose wraps at 100 columns: a sentence is found whole.
  for (char c : app::rehearsalText(r.rehearsal, r.status, false)) {
    if (c == '\n') c = ' ';
    if (c != ' ' || r.text.empty() || r.text.back() != ' ') r.text += c;
  }
  return r;
}

std::vector<const Rehearsed*> domainItems(const core::Rehearsal& r) {
  std::vector<const Rehearsed*> out;
  for (const auto& i : r.items) {
    if (i.kind == core::ChangeKind::Domain) out.push_back(&i);
  }
  return out;
}

// Debian's 6.1 refuses a group of several devices any type, EINVAL, before it looks at drivers.
TEST(Rehearsal, AGroupOfSeveralDevicesIsRefusedWithEinvalOn61) {
  auto r = rehearse(*twoNvmeOneGroup("6.1.140-1"), kNvmeIdentity);
  auto items = domainItems(r.rehearsal);
  ASSERT_FALSE(items.empty()) << r.text;
  for (const auto* i : items) {
    EXPECT_EQ(i->verdict, V::Refused);
    EXPECT_EQ(i->object, "group 20");
    ASSERT_TRUE(i->kernel.has_value());
    EXPECT_EQ(i->kernel->check, core::TypeWriteCheck::SeveralDevices);
    EXPECT_EQ(i->kernel->error, EINVAL);
    EXPECT_FALSE(i->safety.has_value());
  }
  EXPECT_EQ(r.rehearsal.count(V::Taken), 0U);
  EXPECT_NE(r.text.find("the kernel would refuse the write: before 6.4 a group of several devices cannot change "
                        "type: EINVAL"),
            std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("0 would be done, " + std::to_string(items.size()) + " refused"), std::string::npos) << r.text;
}

// 6.12 takes the same change once the NVMe drivers let go; the switch's ports keep pcieport.
TEST(Rehearsal, TheSameGroupOn612IsTakenAfterUnbindingItsNvmeDrivers) {
  auto r = rehearse(*twoNvmeOneGroup("6.12.48-1"), kNvmeIdentity);
  auto items = domainItems(r.rehearsal);
  ASSERT_EQ(items.size(), 1U) << r.text;
  const auto& i = *items.front();
  EXPECT_EQ(i.verdict, V::Taken);
  EXPECT_FALSE(i.live);
  std::vector<core::MemberStep> unbind{{"0000:03:00.0", "nvme", true}, {"0000:04:00.0", "nvme", true}};
  EXPECT_EQ(i.unbind, unbind);
  EXPECT_EQ(r.rehearsal.count(V::Refused), 0U);
  EXPECT_NE(r.text.find("after unbinding nvme from 0000:03:00.0, nvme from 0000:04:00.0; rebound after the write"),
            std::string::npos)
      << r.text;
}

// The kernel refuses identity for an untrusted device, and so does iommud's safety rule.
TEST(Rehearsal, AnUntrustedDeviceIsRefused) {
  auto r = rehearse(*thunderboltNic(), kUntrustedIdentity);
  auto items = domainItems(r.rehearsal);
  ASSERT_EQ(items.size(), 1U) << r.text;
  const auto& i = *items.front();
  EXPECT_EQ(i.verdict, V::Refused);
  EXPECT_EQ(i.safety, core::DomainRefusal::Untrusted);
  ASSERT_TRUE(i.kernel.has_value());
  EXPECT_EQ(i.kernel->check, core::TypeWriteCheck::DeviceForbids);
  EXPECT_EQ(i.kernel->error, EINVAL);
  EXPECT_NE(i.why.find("is untrusted"), std::string::npos) << i.why;
  EXPECT_NE(r.text.find("Would be refused"), std::string::npos) << r.text;
}

// DMA -> DMA-FQ is the live path since 6.4: no driver is unbound, and it stays until unbind or reboot.
TEST(Rehearsal, DmaToDmaFqIsLiveOn612) {
  auto h = twoNvmeOneGroup("6.12.48-1");
  h->write("/sys/kernel/iommu_groups/20/type", "DMA\n");  // booted strict
  auto r = rehearse(*h, kNvmeLazy);
  auto items = domainItems(r.rehearsal);
  ASSERT_EQ(items.size(), 1U) << r.text;
  EXPECT_EQ(items.front()->verdict, V::Taken);
  EXPECT_TRUE(items.front()->live);
  EXPECT_TRUE(items.front()->unbind.empty());
  EXPECT_NE(r.text.find("live, with the drivers bound"), std::string::npos) << r.text;
}

// Advice is left to advise, not judged as a change.
TEST(Rehearsal, AdviceIsLeftToAdvise) {
  std::string advise = kNvmeIdentity;
  advise.insert(advise.find("[rule.match]"), "mode = \"advise\"\n");
  auto r = rehearse(*twoNvmeOneGroup("6.12.48-1"), advise);
  ASSERT_EQ(r.rehearsal.count(V::Advised), 1U) << r.text;
  EXPECT_EQ(r.rehearsal.count(V::Taken), 0U);
  EXPECT_NE(r.text.find("Left to advise"), std::string::npos) << r.text;
}

}  // namespace rehearsal_test
