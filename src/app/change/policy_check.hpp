#pragma once

#include <string>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "config/policy_loader.hpp"

namespace iommud::app {

/// The layers under `root`, highest precedence first: admin, runtime (the host's), shipped (this program's).
std::vector<std::string> policyLayers(const std::string& root);

/// Adds to a valid policy set's diagnostics a warning for each setting that can never act
/// (core::lintRules), with what /sys/module under `root` says of the modules the rules name.
void lintPolicies(const adapters::sysfs::Root& root, config::Loaded& loaded);

}  // namespace iommud::app
