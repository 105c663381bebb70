#include "core/domain_safety.hpp"

#include <algorithm>

#include "core/domain_change.hpp"

namespace iommud::core {

namespace {

bool neverUnbound(const PciDevice& d) {
  return std::any_of(d.inUse.begin(), d.inUse.end(), [](const InUseReason& u) {
    return u.kind == InUseReason::Kind::Vfio || u.kind == InUseReason::Kind::SriovVfs;
  });
}

// The words of every refusal, in one place: what the planner's skips and the transaction's
// preflight say.
std::string refusalText(DomainRefusal refusal, const Group& group, DomainType to, const DomainSafety& s,
                        const std::optional<KernelVersion>& version) {
  const std::string object = "group " + std::to_string(group.id);
  const std::string target(toString(to));
  const PciDevice* d = s.device;
  switch (refusal) {
    case DomainRefusal::NoDefaultDomain:
      return object + " has no default domain the kernel lets iommud change (type reads \"" + group.typeText + "\")";
    case DomainRefusal::Untrusted:
      return d->displayName() + " is untrusted (" +
             (d->thunderbolt ? "behind a Thunderbolt/USB4 port" : "removable, below an external-facing port") + "): " +
             (to == DomainType::Identity
                  ? "the kernel refuses identity for it, and it would give that device all of memory"
                  : "lazy invalidation would leave freed buffers reachable by the device iommud trusts least") +
             "; no policy can ask for this";
    case DomainRefusal::NoPassThrough:
      return "this VT-d unit has no pass-through support (ecap.PT = 0): the kernel keeps DMA";
    case DomainRefusal::KernelRule:
    case DomainRefusal::DeviceForbids:
      return describeRefusal(s.way.verdict, group.id, group.devices.size(), to, version);
    case DomainRefusal::InUse:
      return "changing " + object + " to " + target + " needs every driver in it unbound, and " + d->displayName() +
             " (" + d->address + ") is in use: " + d->inUse.front().detail +
             "; unbinding it would take it away from its users";
    case DomainRefusal::NeverUnbind: break;
  }
  const auto never = std::find_if(d->inUse.begin(), d->inUse.end(), [](const InUseReason& u) {
    return u.kind == InUseReason::Kind::Vfio || u.kind == InUseReason::Kind::SriovVfs;
  });
  return "changing " + object + " to " + target + " needs every driver in it unbound, and " + d->displayName() + " (" +
         d->address + ") must never be unbound: " + never->detail + "; iommud never unbinds it";
}

DomainSafety withRefusal(DomainSafety& s, DomainRefusal why, const Group& group, DomainType to,
                         const std::optional<KernelVersion>& version) {
  s.refusal = why;
  s.message = refusalText(why, group, to, s, version);
  return s;
}

}  // namespace

bool unbindsFor(const DomainRules& rules, const TypeChangeWay& way, const PciDevice& device) {
  return way.unbindFirst && device.driver && mustUnbind(rules, *device.driver);
}

std::string inUseWhy(const PciDevice& device) {
  return device.displayName() + " (" + device.address + "): " + device.inUse.front().detail;
}

DomainSafety judgeDomainChange(const HostFacts& host, const Group& group, DomainType to) {
  const auto& version = host.kernel.upstream.version;
  DomainSafety s;
  if (!group.type || (!isTranslated(*group.type) && *group.type != DomainType::Identity)) {
    return withRefusal(s, DomainRefusal::NoDefaultDomain, group, to, version);
  }
  std::vector<const PciDevice*> members;
  for (const auto& address : group.devices) {
    if (const PciDevice* d = host.device(address)) members.push_back(d);  // else not PCI: the kernel judges it
  }
  // iommud's rule first, where the kernel would allow it (the live DMA -> DMA-FQ since 6.4).
  if (to == DomainType::Identity || to == DomainType::DmaFq) {
    auto u = std::find_if(members.begin(), members.end(), [](const PciDevice* d) { return d->untrusted(); });
    if (u != members.end()) {
      s.device = *u;
      return withRefusal(s, DomainRefusal::Untrusted, group, to, version);
    }
  }
  if (to == DomainType::Identity && std::any_of(host.units.begin(), host.units.end(), [](const IommuUnit& u) {
        return u.intel && !u.intel->passThrough();
      })) {
    return withRefusal(s, DomainRefusal::NoPassThrough, group, to, version);
  }
  // What this kernel's iommu_group_store_type() takes, and how (docs/kernel.md §2.2): live with the
  // drivers bound, after an unbind, or not at all (e.g. a group of several devices before 6.4, even
  // for DMA -> DMA-FQ).
  const auto& rules = domainRules(version);
  s.way = typeChangeWay(rules, groupAtWrite(host, group), to);
  if (!s.way.verdict.taken()) {
    const auto why =
        s.way.verdict.check == TypeWriteCheck::DeviceForbids ? DomainRefusal::DeviceForbids : DomainRefusal::KernelRule;
    return withRefusal(s, why, group, to, version);
  }
  for (const PciDevice* d : members) {
    if (d->inUse.empty() || !unbindsFor(rules, s.way, *d)) continue;
    s.device = d;
    return withRefusal(s, neverUnbound(*d) ? DomainRefusal::NeverUnbind : DomainRefusal::InUse, group, to, version);
  }
  return s;
}

}  // namespace iommud::core
