#include "core/domain_change.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/domain_safety.hpp"

namespace iommud::core {

namespace {

Error refused(int group, std::string why) {
  return Error{0, "group " + std::to_string(group), std::move(why)};
}

}  // namespace

GroupAtWrite groupAtWrite(const HostFacts& host, const Group& group) {
  GroupAtWrite g;
  g.current = group.type;
  if (g.current == DomainType::Unknown) g.current.reset();  // "unknown": no default domain
  for (const auto& address : group.devices) {
    const PciDevice* d = host.device(address);
    GroupAtWrite::Member m;
    if (d != nullptr) {
      m.driver = d->driver;
      m.untrusted = d->untrusted();
    }
    g.members.push_back(std::move(m));
  }
  return g;
}

Result<DomainChange> prepareDomainChange(const HostFacts& host, int id, DomainType to) {
  const Group* g = host.group(id);
  if (g == nullptr) return refused(id, "no such IOMMU group");
  if (to != DomainType::Identity && to != DomainType::Dma && to != DomainType::DmaFq) {
    return refused(id, "only identity, DMA and DMA-FQ can be written");
  }
  DomainChange change;
  change.group = id;
  change.from = g->type.value_or(DomainType::Unknown);
  change.to = to;
  if (change.noop()) return change;
  // The same predicate the planner asked (core/domain_safety), on the facts given here.
  auto safety = judgeDomainChange(host, *g, to);
  if (!safety.allowed()) return refused(id, std::move(safety.message));
  change.live = safety.way.verdict.live;
  const auto& rules = domainRules(host.kernel.upstream.version);
  for (const auto& address : g->devices) {
    const PciDevice* d = host.device(address);
    if (d == nullptr) continue;  // not a PCI function; the kernel judges it
    change.members.push_back(MemberStep{address, d->driver, unbindsFor(rules, safety.way, *d)});
  }
  return change;
}

std::string explainTypeWriteError(int error, const std::optional<KernelVersion>& version, size_t groupDevices) {
  bool modern = domainRules(version).multiDevice;
  switch (error) {
    case EACCES: return "permission denied: the write needs CAP_SYS_ADMIN and CAP_SYS_RAWIO";
    case EPERM:
      if (modern) return "a driver is still bound to a device of the group, or VFIO/iommufd owns the group";
      return "permission denied";
    case EBUSY:
      if (!modern) {
        return "a driver is still bound to the device, or the group is attached to a domain other than its "
               "default (VFIO)";
      }
      return "the device is busy";
    case EINVAL:
      if (!modern && groupDevices > 1) {
        return "the group holds several devices; Linux before 6.4 changes only groups of one device";
      }
      // For an untrusted device 6.1 logs "Device cannot be in Passthrough domain" and 6.12 nothing
      // (tests/vm, the untrusted scenario): no dmesg line to point to.
      return "the kernel refuses this type for the group: a device of it is untrusted (below an "
             "external-facing port), or its driver or the platform requires another type";
    case ENOMEM:
    case ENODEV: return "the kernel could not set up the new domain and kept the old one";
    case ENOENT: return "the group or its type attribute no longer exists (the device went away?)";
    default: return std::strerror(error);
  }
}

}  // namespace iommud::core
