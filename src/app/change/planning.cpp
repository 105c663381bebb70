#include "app/change/planning.hpp"

#include <unistd.h>

#include "adapters/initramfs/initramfs_reader.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "app/change/policy_check.hpp"

namespace iommud::app {

std::optional<unsigned> configOwner() {
  return ::geteuid() == 0 ? std::optional<unsigned>(0U) : std::nullopt;
}

config::Loaded loadPolicies(const PolicySources& sources) {
  config::LoadOptions options;
  options.requireOwner = configOwner();
  if (sources.root != "/") options.opener = adapters::sysfs::PrefixOpener(sources.root);
  if (!sources.dirs.empty() || !sources.files.empty())
    return config::loadPolicyFiles(sources.dirs, sources.files, options);
  return config::loadPolicyFiles(policyLayers(sources.root), {}, options);
}

void readPolicyModules(const adapters::sysfs::Root& root, const core::PolicySet& policies, core::HostFacts& host) {
  for (const auto& r : policies.rules) {
    for (const auto& p : r.params) {
      if (!p.module.empty() && !host.modules.contains(p.module)) {
        host.modules.emplace(p.module, adapters::sysfs::readModule(root, p.module));
      }
    }
  }
}

void listInitramfsFor(const adapters::sysfs::Root& root, core::Plan& plan, Status& status) {
  if (!core::writesModprobeD(plan)) return;
  core::KernelInfo& k = status.host.kernel;
  if (k.initramfs.state == core::Initramfs::State::NotRead) {
    k.initramfs = adapters::initramfs::readInitramfs(root, k.release);
  }
  core::noteInitramfs(plan, status.host);
}

}  // namespace iommud::app
