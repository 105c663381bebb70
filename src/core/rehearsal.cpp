#include "core/rehearsal.hpp"

#include <algorithm>
#include <iterator>

namespace iommud::core {

namespace {

// The skips whose reason is a refusal of the kernel or of a safety rule (core/domain_safety), not
// a choice of the policies (hotplug only, acceptance, conflicts, overrides).
bool refusal(SkipReason r) {
  switch (r) {
    case SkipReason::Untrusted:
    case SkipReason::KernelTooOld:
    case SkipReason::Unsupported:
    case SkipReason::InUse:
    case SkipReason::NeverUnbind: return true;
    default: return false;
  }
}

// A domain change judged as the transaction's preflight judges it; refused, with what the kernel
// itself would answer the write (it may take what a safety rule refuses).
void judgeDomain(Rehearsed& r, const HostFacts& host, int groupId, DomainType to) {
  auto prepared = prepareDomainChange(host, groupId, to);
  if (prepared) {
    r.verdict = Rehearsed::Verdict::Taken;
    r.live = prepared->live;
    std::copy_if(prepared->members.begin(), prepared->members.end(), std::back_inserter(r.unbind),
                 [](const MemberStep& m) { return m.unbind; });
    return;
  }
  r.verdict = Rehearsed::Verdict::Refused;
  r.why = prepared.error().message;
  const Group* g = host.group(groupId);
  if (g == nullptr) return;
  const auto safety = judgeDomainChange(host, *g, to);
  if (safety.refusal != DomainRefusal::KernelRule && safety.refusal != DomainRefusal::DeviceForbids)
    r.safety = safety.refusal;
  r.kernel = typeChangeWay(domainRules(host.kernel.upstream.version), groupAtWrite(host, *g), to).verdict;
}

bool ethtoolRead(const HostFacts& host, const Change& c) {
  const PciDevice* d = host.device(c.device);
  if (d == nullptr) return false;
  return std::any_of(d->netdevs.begin(), d->netdevs.end(),
                     [&](const NetDev& n) { return n.name == c.object && n.ethtool.read; });
}

Rehearsed fromChange(const Change& c, const HostFacts& host) {
  Rehearsed r{.kind = c.kind,
              .device = c.device,
              .object = c.object,
              .key = c.key,
              .from = c.from,
              .to = c.to,
              .rule = c.rule,
              .tradeOff = c.tradeOff};
  if (c.mode == RuleMode::Advise) {
    r.verdict = Rehearsed::Verdict::Advised;
    return r;
  }
  switch (c.kind) {
    case ChangeKind::Domain:
      if (auto to = parseDomainType(c.to); c.group && to) judgeDomain(r, host, *c.group, *to);
      break;
    case ChangeKind::Rings:
    case ChangeKind::Channels:
    case ChangeKind::Coalesce: r.assumed = !ethtoolRead(host, c); break;
    case ChangeKind::ModuleParam:
    case ChangeKind::ModprobeConf: break;
  }
  return r;
}

Rehearsed fromSkip(const Skip& s, const HostFacts& host) {
  Rehearsed r{.verdict = Rehearsed::Verdict::Refused,
              .kind = s.kind,
              .device = s.device,
              .object = s.object,
              .key = s.key,
              .to = s.wanted,
              .rule = s.rule,
              .why = s.message};
  const PciDevice* d = host.device(s.device);
  auto to = parseDomainType(s.wanted);
  if (s.kind == ChangeKind::Domain && d != nullptr && d->group && to) judgeDomain(r, host, *d->group, *to);
  return r;
}

}  // namespace

size_t Rehearsal::count(Rehearsed::Verdict v) const {
  return static_cast<size_t>(
      std::count_if(items.begin(), items.end(), [&](const Rehearsed& r) { return r.verdict == v; }));
}

Rehearsal rehearse(const Plan& plan, const HostFacts& host) {
  Rehearsal out;
  for (const auto& c : plan.changes) out.items.push_back(fromChange(c, host));
  for (const auto& s : plan.skips) {
    if (refusal(s.reason)) out.items.push_back(fromSkip(s, host));
  }
  return out;
}

}  // namespace iommud::core
