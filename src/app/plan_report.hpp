#pragma once

#include <optional>
#include <string>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "app/status_report.hpp"
#include "config/policy_loader.hpp"
#include "core/plan.hpp"

namespace iommud::app {

/// Where policies come from: the three layers under a root, or directories and files given
/// explicitly (`--policies DIR`, `iommuctl check FILE`), which replace the layers.
struct PolicySources {
  std::string root = "/";
  std::vector<std::string> dirs;
  std::vector<std::string> files;
};

/// Who must own what configures iommud: root (0) when running as root, else nobody in particular
/// (a user checking their own files). For loadPolicies and config::loadDaemonConfig.
std::optional<unsigned> configOwner();

/// Loads the policies as the daemon does: root-owned files only when running as root.
config::Loaded loadPolicies(const PolicySources& sources);

/// Adds to the host the modules that rules name and the probe did not read (it reads the modules
/// of bound drivers only).
void readPolicyModules(const adapters::sysfs::Root& root, const core::PolicySet& policies, core::HostFacts& host);

/// Lists the running kernel's initramfs into `status.host.kernel.initramfs` when the policies
/// would write a modprobe.d line (a whole-host plan has one): the plan then says whether boots need
/// the image rebuilt. Listing decompresses tens of MB, which status and other plans never pay.
void readInitramfsIfPlanned(const adapters::sysfs::Root& root, const core::PolicySet& policies, Status& status);

/// Version of the `plan --json` and `explain --json` schema (docs/plan-json.md).
inline constexpr int kPlanSchemaVersion = 1;

/// `iommuctl check`: every diagnostic, one per line, then a summary line.
std::string checkText(const config::Loaded& loaded);

std::string planText(const core::Plan& plan, const Status& status, const core::PolicySet& policies, bool color);
std::string planJson(const core::Plan& plan, const core::PolicySet& policies);

/// Finds a device by PCI address, netdev name or NVMe controller name.
const core::PciDevice* findDevice(const core::HostFacts& host, const std::string& name);

/// `iommuctl explain DEVICE`: the device, its group, the host facts that matter, every rule that
/// matched or nearly matched and why, and the plan for it.
std::string explainText(const core::PciDevice& device, const Status& status, const core::PolicySet& policies,
                        const std::vector<core::RuleEvaluation>& evaluations, const core::Plan& plan, bool color);
std::string explainJson(const core::PciDevice& device, const Status& status,
                        const std::vector<core::RuleEvaluation>& evaluations, const core::Plan& plan);

}  // namespace iommud::app
