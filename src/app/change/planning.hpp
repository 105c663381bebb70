#pragma once

#include <optional>
#include <string>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "app/host/status.hpp"
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

/// Loads the policies as the daemon does: root-owned files only when running as root. Under a
/// root other than "/", whatever lies in it (its layers) is opened inside it: a link in a
/// captured tree never opens a file of this machine's.
config::Loaded loadPolicies(const PolicySources& sources);

/// Adds to the host the modules that rules name and the probe did not read (it reads the modules
/// of bound drivers only).
void readPolicyModules(const adapters::sysfs::Root& root, const core::PolicySet& policies, core::HostFacts& host);

/// When `plan` writes a modprobe.d line, lists the running kernel's initramfs into
/// `status.host.kernel.initramfs` (once) and says in those changes whether boots need the image
/// rebuilt (core::noteInitramfs). Listing decompresses tens of MB, which status and the plans
/// without such a line never pay; the host is not planned a second time.
void listInitramfsFor(const adapters::sysfs::Root& root, core::Plan& plan, Status& status);

}  // namespace iommud::app
