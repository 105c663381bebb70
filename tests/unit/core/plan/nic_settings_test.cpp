#include "core/plan/nic_settings.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace nic_settings_test {

using namespace iommud;
using namespace iommud::testing;
namespace planning = iommud::core::planning;

constexpr const char* kNic = "0000:05:00.0";  // the Thunderbolt AQC100

// The NIC's rx ring as `policy`'s one rule wants it, planned at hotplug.
core::Plan planRx(const app::Status& s, const core::PolicySet& policy) {
  const core::PlanInput in{s.host, s.mode, s.findings};
  std::vector<planning::DeviceCtx> devices{planning::deviceContext(*s.host.device(kNic), nullptr)};
  devices[0].rings.emplace_back("rx", &policy.rules.front());
  core::PlanOptions options;
  options.trigger = core::Trigger::Hotplug;
  planning::Recorder out{options, {}};
  planning::planNicSettings(planning::hostContext(in), devices, out);
  return std::move(out.plan);
}

// The NIC as ethtool reads it: an rx ring of 2048 of at most 8184.
app::Status readRings() {
  auto s = statusOf(*thunderboltNic());
  auto& e = s.host.device(kNic)->netdevs.front().ethtool;
  e.read = true;
  e.rings = {{"rx", 2048}};
  e.ringsMax = {{"rx", 8184}};
  return s;
}

TEST(NicSettings, ResolvesMaxToTheMaximumTheDriverReports) {
  auto s = readRings();
  auto plan = planRx(s, rules(R"(
[[rule]]
name = "rx"
description = "rx max"
[rule.match]
kind = "nic"
[rule.rings]
rx = "max"
)"));
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].from, "2048");
  EXPECT_EQ(plan.changes[0].to, "8184");
  EXPECT_EQ(plan.changes[0].note, "may reset the link");
}

TEST(NicSettings, RefusesAValueBeyondTheMaximum) {
  auto s = readRings();
  auto plan = planRx(s, rules(R"(
[[rule]]
name = "rx"
description = "rx too many"
[rule.match]
kind = "nic"
[rule.rings]
rx = 9000
)"));
  EXPECT_TRUE(plan.changes.empty());
  ASSERT_EQ(plan.skips.size(), 1U);
  EXPECT_EQ(plan.skips[0].reason, core::SkipReason::Unsupported);
  EXPECT_NE(plan.skips[0].message.find("allows at most 8184"), std::string::npos) << plan.skips[0].message;
}

TEST(NicSettings, PlansAnUnreadInterfaceWithItsValueUnknown) {
  auto s = statusOf(*thunderboltNic());
  s.host.device(kNic)->netdevs.front().ethtool.read = false;
  auto plan = planRx(s, rules(R"(
[[rule]]
name = "rx"
description = "rx 4096"
[rule.match]
kind = "nic"
[rule.rings]
rx = 4096
)"));
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].from, "unknown");
  EXPECT_EQ(plan.changes[0].to, "4096");
  EXPECT_EQ(plan.changes[0].note, "current values not read (no ethtool access under --root); may reset the link");
}

}  // namespace nic_settings_test
