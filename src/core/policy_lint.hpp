#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/host.hpp"
#include "core/policy.hpp"

namespace iommud::core {

/// The trade-off a rule must accept before it sets a group's domain to `to` (identity:
/// no-isolation, DMA-FQ: lazy-invalidation); nullopt when `to` weakens nothing. A safety rule:
/// the planner (needs-acceptance) and lintRules both ask it.
std::optional<Acceptance> acceptanceFor(DomainType to);
/// "Add accept = [\"no-isolation\"] to the rule (or an [[override]]) to accept it".
std::string howToAccept(Acceptance a);

/// Whether a loaded module surely has no parameter `name`: it lists others in /sys/module (one
/// without permissions is not listed; a module that lists none tells nothing).
bool lacksParam(const Module& m, const std::string& name);

/// A setting of a rule that can never act, on any host: what `iommuctl check` warns about.
struct LintWarning {
  SourceLoc where;
  std::string message;
};

/// The rules' settings that no host lets act, by the planner's own safety rules: a weakening
/// domain without its `accept` (needs-acceptance), ethtool settings on a rule that matches only
/// kinds without a network interface (no-netdev), a parameter its module surely lacks
/// (`modules`: what /sys/module says of the modules the rules name, read by the caller).
std::vector<LintWarning> lintRules(const std::vector<Rule>& rules, const std::map<std::string, Module>& modules);

}  // namespace iommud::core
