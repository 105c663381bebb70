#include "core/domain_change.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

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
  if (!g->type) return refused(id, "its type could not be read (\"" + g->typeText + "\")");
  if (to != DomainType::Identity && to != DomainType::Dma && to != DomainType::DmaFq) {
    return refused(id, "only identity, DMA and DMA-FQ can be written");
  }
  DomainChange change;
  change.group = id;
  change.from = *g->type;
  change.to = to;
  if (change.noop()) return change;
  if (!isTranslated(change.from) && change.from != DomainType::Identity) {
    return refused(id, "it is " + std::string(toString(change.from)) + ", not a default domain iommud may change");
  }
  const auto& version = host.kernel.upstream.version;
  const auto& rules = domainRules(version);
  // The kernel's own checks, in its order (docs/kernel.md §2.2); the untrusted refusal below is
  // iommud's rule and comes first where the kernel would allow it (the live path since 6.4).
  auto way = typeChangeWay(rules, groupAtWrite(host, *g), to);
  change.live = way.verdict.live;
  const bool deviceForbids = way.verdict.check == TypeWriteCheck::DeviceForbids;
  if (!way.verdict.taken() && !deviceForbids) {
    return refused(id, describeRefusal(way.verdict, id, g->devices.size(), to, version));
  }
  if (to == DomainType::Identity) {
    bool noPassThrough = std::any_of(host.units.begin(), host.units.end(),
                                     [](const IommuUnit& u) { return u.intel && !u.intel->passThrough(); });
    if (noPassThrough) return refused(id, "a VT-d unit has no pass-through support (ecap.PT = 0)");
  }
  for (const auto& address : g->devices) {
    const PciDevice* d = host.device(address);
    if (d == nullptr) continue;  // not a PCI function; the kernel judges it
    if (d->untrusted() && (to == DomainType::Identity || to == DomainType::DmaFq)) {
      return refused(id, d->displayName() + " (" + address + ") is untrusted: " + std::string(toString(to)) +
                             " is never set for a device behind an external port");
    }
    MemberStep m{address, d->driver, false};
    if (way.unbindFirst && d->driver && mustUnbind(rules, *d->driver)) {
      for (const auto& why : d->inUse) {
        bool never = why.kind == InUseReason::Kind::Vfio || why.kind == InUseReason::Kind::SriovVfs;
        return refused(id, d->displayName() + " (" + address + ") " +
                               (never ? "must never be unbound: " : "is in use: ") + why.detail);
      }
      if (*d->driver == "vfio-pci") {
        return refused(id, address +
                               " is bound to vfio-pci, which iommud never unbinds (it blocks until the VM "
                               "lets the device go)");
      }
      if (d->sriovNumVfs > 0) {
        return refused(id, address + " has " + std::to_string(d->sriovNumVfs) +
                               " SR-IOV virtual functions enabled; unbinding it would destroy them");
      }
      m.unbind = true;
    }
    change.members.push_back(std::move(m));
  }
  if (deviceForbids) return refused(id, describeRefusal(way.verdict, id, g->devices.size(), to, version));
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
