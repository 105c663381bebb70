#include "core/plan/rule_match.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace rule_match_test {

using namespace iommud;
using namespace iommud::testing;
namespace planning = iommud::core::planning;

constexpr const char* kTwoConditions = R"(
[[rule]]
name = "nic-on-amd"
description = "a NIC behind an AMD IOMMU"
domain = "DMA"
[rule.match]
kind = "nic"
[rule.host]
iommu = "amd"
)";

TEST(RuleMatch, ShortCircuitsWhilePlanningButCollectsEveryConditionToExplain) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto policy = rules(kTwoConditions);
  const core::PlanInput in{s.host, s.mode, s.findings};
  const auto host = planning::hostContext(in);
  const auto device = planning::deviceContext(*s.host.device("0000:03:00.0"), nullptr);  // an NVMe drive

  planning::Eval<false> plan(nullptr);
  EXPECT_FALSE(planning::matchRule(policy.rules.front(), host, device, plan));

  std::vector<core::ConditionResult> conditions;
  planning::Eval<true> explain(&conditions);
  planning::matchRule(policy.rules.front(), host, device, explain);
  EXPECT_FALSE(explain.all());
  ASSERT_EQ(conditions.size(), 2U);
  EXPECT_EQ(conditions[0].condition, "kind = \"nic\"");
  EXPECT_FALSE(conditions[0].holds);
  EXPECT_EQ(conditions[1].condition, "host.iommu = \"amd\"");
  EXPECT_FALSE(conditions[1].holds);
}

TEST(RuleMatch, AHostConditionIsJudgedWithoutADevice) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto policy = rules(kTwoConditions);
  const core::PlanInput in{s.host, s.mode, s.findings};
  const auto host = planning::hostContext(in);
  planning::Eval<false> e(nullptr);
  EXPECT_EQ(planning::matchHost(policy.rules.front().host, host, e, nullptr), host.vendor == core::Vendor::Amd);
}

}  // namespace rule_match_test
