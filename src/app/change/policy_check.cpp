#include "app/change/policy_check.hpp"

#include "app/change/planning.hpp"
#include "core/policy_lint.hpp"

namespace iommud::app {

std::vector<std::string> policyLayers(const std::string& root) {
  std::string prefix = root == "/" ? "" : root;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  // The host's layers are the host's (under --root, the captured host's); the shipped layer is
  // this program's own.
  std::vector<std::string> dirs;
  for (const auto& d : config::hostPolicyDirs()) dirs.push_back(prefix + d);
  dirs.push_back(config::shippedPolicyDir());
  return dirs;
}

void lintPolicies(const adapters::sysfs::Root& root, config::Loaded& loaded) {
  if (!loaded.ok()) return;
  core::HostFacts host;
  readPolicyModules(root, loaded.policies, host);
  for (auto& w : core::lintRules(loaded.policies.rules, host.modules)) {
    loaded.diagnostics.push_back({std::move(w.where), config::Diagnostic::Severity::Warning, std::move(w.message)});
  }
}

}  // namespace iommud::app
