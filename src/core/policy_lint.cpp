#include "core/policy_lint.hpp"

#include <algorithm>

#include "core/spelling.hpp"

namespace iommud::core {

std::optional<Acceptance> acceptanceFor(DomainType to) {
  if (to == DomainType::Identity) return Acceptance::NoIsolation;
  if (to == DomainType::DmaFq) return Acceptance::LazyInvalidation;
  return std::nullopt;
}

std::string howToAccept(Acceptance a) {
  return "Add accept = [\"" + std::string(toString(a)) + "\"] to the rule (or an [[override]]) to accept it";
}

bool lacksParam(const Module& m, const std::string& name) {
  return m.loaded && !m.params.empty() && !m.params.contains(name);
}

namespace {

std::optional<DomainType> typeOf(DomainRequest r) {
  switch (r) {
    case DomainRequest::Identity: return DomainType::Identity;
    case DomainRequest::Dma: return DomainType::Dma;
    case DomainRequest::DmaFq: return DomainType::DmaFq;
    case DomainRequest::Auto: break;  // the boot default: known on a host only
  }
  return std::nullopt;
}

void lintDomain(const Rule& r, std::vector<LintWarning>& out) {
  if (!r.domain || r.mode != RuleMode::Apply) return;  // advice is never refused for its trade-off
  auto to = typeOf(*r.domain);
  auto need = to ? acceptanceFor(*to) : std::nullopt;
  if (!need || r.accepted(*need)) return;
  out.push_back({r.domainWhere, "rule '" + r.name + "' asks for " + std::string(toString(*r.domain)) +
                                    " but does not accept the trade-off, so it never acts (plan: needs-acceptance). " +
                                    howToAccept(*need)});
}

// kind() is Nic for every device with a network interface but an NVMe controller.
void lintEthtool(const Rule& r, std::vector<LintWarning>& out) {
  const auto& kinds = r.device.kinds;
  if (kinds.empty() || std::find(kinds.begin(), kinds.end(), DeviceKind::Nic) != kinds.end()) return;
  std::string what;
  for (const auto& [table, set] :
       {std::pair{"[rule.rings]", !r.rings.empty()}, std::pair{"[rule.channels]", !r.channels.empty()},
        std::pair{"[rule.coalesce]", !r.coalesce.empty()}}) {
    if (set) what += (what.empty() ? "" : ", ") + std::string(table);
  }
  if (what.empty()) return;
  std::string matched;
  for (auto k : kinds) matched += (matched.empty() ? "" : ", ") + std::string(toString(k));
  out.push_back({r.where, "rule '" + r.name + "' sets " + what + " but matches only kind " + matched +
                              ", which has no network interface, so they never act (plan: no-netdev)"});
}

void lintParams(const Rule& r, const std::map<std::string, Module>& modules, std::vector<LintWarning>& out) {
  for (const auto& p : r.params) {
    auto m = modules.find(p.module);
    if (p.module.empty() || m == modules.end() || !lacksParam(m->second, p.name)) continue;
    std::vector<std::string> names;
    for (const auto& [name, value] : m->second.params) names.push_back(name);
    auto near = nearestWord(p.name, names);
    out.push_back({p.where, "module " + p.module + " has no parameter '" + p.name + "' (read in /sys/module/" +
                                p.module + "/parameters, which lists all but those without permissions)" +
                                (near ? "; did you mean '" + *near + "'?" : "")});
  }
}

}  // namespace

std::vector<LintWarning> lintRules(const std::vector<Rule>& rules, const std::map<std::string, Module>& modules) {
  std::vector<LintWarning> out;
  for (const auto& r : rules) {
    if (!r.enabled) continue;  // it does nothing, which is what it says
    lintDomain(r, out);
    lintEthtool(r, out);
    lintParams(r, modules, out);
  }
  return out;
}

}  // namespace iommud::core
