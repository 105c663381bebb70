#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/report/status_report.hpp"
#include "config/policy_loader.hpp"
#include "core/plan.hpp"
#include "core/rehearsal.hpp"

namespace iommud::app {

/// Version of the `plan --json` and `explain --json` schema (docs/plan-json.md).
inline constexpr int kPlanSchemaVersion = 1;

/// `iommuctl check`: every diagnostic, one per line, then a summary line.
std::string checkText(const config::Loaded& loaded);

std::string planText(const core::Plan& plan, const Status& status, const core::PolicySet& policies, bool color,
                     size_t width = kTextWidth);
std::string planJson(const core::Plan& plan, const core::PolicySet& policies);

/// `iommuctl apply --simulate`: what apply would do on this host's kernel (each domain change live
/// or after which unbinds, each setting), what the kernel or a safety rule would refuse and why,
/// and what is left to advise. Nothing of it is done.
std::string rehearsalText(const core::Rehearsal& rehearsal, const Status& status, bool color,
                          size_t width = kTextWidth);

/// `iommuctl explain DEVICE`: the device, its group, the host facts that matter, every rule that
/// matched or nearly matched and why, and the plan for it.
std::string explainText(const core::PciDevice& device, const Status& status, const core::PolicySet& policies,
                        const std::vector<core::RuleEvaluation>& evaluations, const core::Plan& plan, bool color,
                        size_t width = kTextWidth);
std::string explainJson(const core::PciDevice& device, const Status& status,
                        const std::vector<core::RuleEvaluation>& evaluations, const core::Plan& plan);

}  // namespace iommud::app
