#include "core/plan/module_params.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace module_params_test {

using namespace iommud;
using namespace iommud::testing;
namespace planning = iommud::core::planning;

constexpr const char* kItr = R"(
[[rule]]
name = "itr"
description = "a parameter without a module"
[rule.match]
kind = "nvme"
[[rule.param]]
name = "itr"
value = 0
)";

TEST(ModuleParams, SkipsAParameterOfADeviceWithoutADriverWhenTheRuleNamesNoModule) {
  auto s = statusOf(*twoNvmeOneGroup());
  core::PciDevice driverless = *s.host.device("0000:03:00.0");
  driverless.driver.reset();
  driverless.driverModule.clear();
  auto policy = rules(kItr);
  core::PlanOptions options;
  planning::Recorder out{options, {}};
  planning::ParamWishes wishes;
  wishes.collect(planning::deviceContext(driverless, nullptr), policy.rules.front(), out);
  wishes.plan({s.host, s.mode, s.findings}, out);
  EXPECT_TRUE(out.plan.changes.empty());
  ASSERT_EQ(out.plan.skips.size(), 1U);
  EXPECT_EQ(out.plan.skips[0].reason, core::SkipReason::ParamMissing);
  EXPECT_EQ(out.plan.skips[0].object, "(no driver)");
}

TEST(ModuleParams, ALaterRuleOverridesAndIsSaidWhenAsked) {
  auto s = statusOf(*twoNvmeOneGroup());
  const core::PciDevice& nvme = *s.host.device("0000:03:00.0");
  auto policy = rules(R"(
[[rule]]
name = "first"
description = "poll queues"
[rule.match]
kind = "nvme"
[[rule.param]]
name = "poll_queues"
value = 2
[[rule]]
name = "second"
description = "more poll queues"
[rule.match]
kind = "nvme"
[[rule.param]]
name = "poll_queues"
value = 4
)");
  core::PlanOptions options;
  options.reportOverridden = true;
  planning::Recorder out{options, {}};
  planning::ParamWishes wishes;
  const auto c = planning::deviceContext(nvme, nullptr);
  wishes.collect(c, policy.rules[0], out);
  wishes.collect(c, policy.rules[1], out);
  ASSERT_EQ(out.plan.skips.size(), 1U);
  EXPECT_EQ(out.plan.skips[0].reason, core::SkipReason::Overridden);
  EXPECT_EQ(out.plan.skips[0].rule.name, "first");
  EXPECT_EQ(out.plan.skips[0].wanted, "2");
}

TEST(ModuleParams, AModprobeLineIsNotWrittenAtBoot) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto policy = rules(R"(
[[rule]]
name = "load"
description = "at load"
[rule.match]
kind = "nvme"
[[rule.param]]
name = "poll_queues"
value = 4
at = "load"
)");
  core::PlanOptions options;
  options.trigger = core::Trigger::Boot;
  planning::Recorder out{options, {}};
  planning::ParamWishes wishes;
  wishes.collect(planning::deviceContext(*s.host.device("0000:03:00.0"), nullptr), policy.rules[0], out);
  wishes.plan({s.host, s.mode, s.findings}, out);
  EXPECT_TRUE(out.plan.changes.empty());
  EXPECT_TRUE(out.plan.skips.empty());
  options.trigger = core::Trigger::Hotplug;
  planning::Recorder later{options, {}};
  wishes.plan({s.host, s.mode, s.findings}, later);
  EXPECT_EQ(later.plan.changes.size() + later.plan.skips.size() + later.plan.satisfied.size(), 1U);
}

}  // namespace module_params_test
