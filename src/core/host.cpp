#include "core/host.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "core/text.hpp"

namespace iommud::core {

std::string_view toString(Vendor vendor) {
  return nameOf(kVendorNames, vendor);
}

std::string_view toString(Confidential kind) {
  return nameOf(kConfidentialNames, kind);
}

std::string_view displayName(Vendor vendor) {
  switch (vendor) {
    case Vendor::None: return "no IOMMU";
    case Vendor::Intel: return "Intel VT-d";
    case Vendor::Amd: return "AMD-Vi";
    case Vendor::ArmSmmu: return "Arm SMMU";
    case Vendor::ArmSmmuV3: return "Arm SMMUv3";
    case Vendor::Virtio: return "virtio-iommu";
    case Vendor::Unknown: break;
  }
  return "unknown IOMMU";
}

Vendor vendorFromUnitName(std::string_view name) {
  if (name.starts_with("dmar")) return Vendor::Intel;
  if (name.starts_with("ivhd")) return Vendor::Amd;
  if (name.starts_with("smmu3.")) return Vendor::ArmSmmuV3;
  if (name.starts_with("smmu.")) return Vendor::ArmSmmu;
  if (name.starts_with("virtio")) return Vendor::Virtio;
  return Vendor::Unknown;
}

Arch deriveArch(const HostFacts& host) {
  if (Arch a = archFromMachine(host.kernel.machine); a != Arch::Unknown) return a;
  const auto& tables = host.firmware.tables;
  auto has = [&](std::string_view t) { return std::find(tables.begin(), tables.end(), t) != tables.end(); };
  bool x86 = has("DMAR") || has("IVRS");
  bool arm = has("IORT");
  for (const auto& u : host.units) {
    x86 = x86 || u.vendor == Vendor::Intel || u.vendor == Vendor::Amd;
    arm = arm || u.vendor == Vendor::ArmSmmu || u.vendor == Vendor::ArmSmmuV3;
  }
  if (x86 == arm) return Arch::Unknown;  // no evidence, or evidence for both
  return x86 ? Arch::X86 : Arch::Arm64;
}

std::string_view toString(DomainType type) {
  return nameOf(kDomainTypeNames, type);
}

std::optional<DomainType> parseDomainType(std::string_view text) {
  return valueNamed(kDomainTypeNames, trim(text));
}

std::string_view toString(InUseReason::Kind kind) {
  return nameOf(kInUseReasonKindNames, kind);
}

std::string_view toString(Removable r) {
  return nameOf(kRemovableNames, r);
}

std::string_view toString(DeviceKind kind) {
  return nameOf(kDeviceKindNames, kind);
}

DeviceKind PciDevice::kind() const {
  if ((classCode >> 8) == 0x0108 || !nvme.empty()) return DeviceKind::Nvme;
  if ((classCode >> 16) == 0x02 || !netdevs.empty()) return DeviceKind::Nic;
  if ((classCode >> 8) == 0x0604) return DeviceKind::Bridge;
  return DeviceKind::Other;
}

std::string PciDevice::displayName() const {
  if (!nvme.empty()) return nvme.front().name;
  if (!netdevs.empty()) return netdevs.front().name;
  return address;
}

std::string PciDevice::identity() const {
  char ids[32];
  std::snprintf(ids, sizeof ids, "%04x:%04x/%04x:%04x", vendorId, deviceId, subsystemVendorId, subsystemDeviceId);
  std::string id = ids;
  if (!nvme.empty() && !nvme.front().serial.empty()) return id + " serial " + nvme.front().serial;
  if (!netdevs.empty() && !netdevs.front().mac.empty()) return id + " mac " + netdevs.front().mac;
  return id;
}

bool isPciAddress(std::string_view s) {
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.';
}

std::string pciFunctionOf(std::string_view path) {
  std::string_view found;
  for (auto part : split(path, '/')) {
    if (isPciAddress(part)) found = part;
  }
  return std::string(found);
}

const PciDevice* HostFacts::device(std::string_view address) const {
  auto it = std::lower_bound(devices.begin(), devices.end(), address,
                             [](const PciDevice& d, std::string_view a) { return d.address < a; });
  return it != devices.end() && it->address == address ? &*it : nullptr;
}

PciDevice* HostFacts::device(std::string_view address) {
  return const_cast<PciDevice*>(std::as_const(*this).device(address));  // NOLINT: one lookup for both
}

const Group* HostFacts::group(int id) const {
  // readHost leaves the groups sorted by id: found by halves there; a list in another order
  // (built by hand) is searched through.
  auto at = std::lower_bound(groups.begin(), groups.end(), id, [](const Group& g, int i) { return g.id < i; });
  if (at != groups.end() && at->id == id) return &*at;
  auto it = std::find_if(groups.begin(), groups.end(), [id](const Group& g) { return g.id == id; });
  return it != groups.end() ? &*it : nullptr;
}

std::vector<std::string> HostFacts::withGroup(const std::string& address) const {
  const PciDevice* d = device(address);
  const Group* g = d != nullptr && d->group ? group(*d->group) : nullptr;
  return g != nullptr ? g->devices : std::vector<std::string>{address};
}

Vendor HostFacts::vendor() const {
  if (units.empty()) return groups.empty() ? Vendor::None : Vendor::Unknown;
  Vendor v = units.front().vendor;
  for (const auto& u : units) {
    if (u.vendor != v) return Vendor::Unknown;
  }
  return v;
}

namespace {

using Kind = InUseReason::Kind;

// Why a block device cannot go away: mounted, swap, or held by a stacked device that is. The
// chain is followed a few levels (partition -> dm-crypt -> LVM -> mount).
void blockUse(const HostFacts& host, const BlockDev& dev, const std::string& rootDev, std::vector<InUseReason>& out,
              const std::string& via, int depth) {
  std::string who = via.empty() ? dev.name : via + " (via " + dev.name + ")";
  for (const auto& m : host.mounts) {
    if (m.devNum != dev.devNum) continue;
    if (m.devNum == rootDev) {
      out.push_back({Kind::RootDevice, who + " holds the root filesystem"});
    } else {
      out.push_back({Kind::Mounted, who + " is mounted at " + m.mountPoint});
    }
  }
  if (std::find(host.swaps.begin(), host.swaps.end(), dev.name) != host.swaps.end()) {
    out.push_back({Kind::Swap, who + " is used as swap"});
  }
  for (const auto& holder : dev.holders) {
    auto it = host.stackedBlock.find(holder);
    std::vector<InUseReason> upper;
    if (it != host.stackedBlock.end() && depth < 4) {
      blockUse(host, it->second, rootDev, upper, via.empty() ? dev.name : via, depth + 1);
    }
    // Being held (dm, md, LVM) is itself a reason: the holder keeps the device open.
    out.push_back({Kind::Held, (via.empty() ? dev.name : via) + " is held by " + holder});
    out.insert(out.end(), upper.begin(), upper.end());
  }
}

}  // namespace

std::string intelDefaultOnSymbol(const KernelInfo& kernel) {
  for (const char* sym : {"CONFIG_INTEL_IOMMU_DEFAULT_ON", "CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF"}) {
    auto it = kernel.config.find(sym);
    if (it != kernel.config.end() && it->second == "y") return sym;
  }
  return {};
}

namespace {

// Intel Thunderbolt switch bridges (drivers/thunderbolt/nhi.h, include/linux/pci_ids.h): Light,
// Cactus, Redwood, Falcon, Win, Alpine, Titan, Goshen and Barlow Ridge.
bool isThunderboltBridge(const PciDevice& d) {
  static constexpr uint16_t kIds[] = {0x1513, 0x1547, 0x1549, 0x1567, 0x1569, 0x156b, 0x156d, 0x157e, 0x1576,
                                      0x1578, 0x15c0, 0x15d3, 0x15da, 0x15e7, 0x15ea, 0x15ef, 0x0b26, 0x5786};
  if (d.vendorId != 0x8086 || (d.classCode >> 8) != 0x0604) return false;
  return std::find(std::begin(kIds), std::end(kIds), d.deviceId) != std::end(kIds);
}

// The host controller's own functions sit right below its bridges: the NHI (0x0880xx on
// Thunderbolt 3, 0x0c0340 on USB4) and its xHCI (0x0c0330).
bool isControllerFunction(const PciDevice& d) {
  return (d.classCode >> 8) == 0x0880 || d.classCode == 0x0c0340 || d.classCode == 0x0c0330;
}

}  // namespace

void detectTunnels(HostFacts& host) {
  bool haveDomain = !host.thunderbolt.empty();
  for (auto& d : host.devices) {
    int tbBridges = 0;
    std::string firstBridge;
    for (const auto& b : d.bridges) {
      const auto* bridge = host.device(b);
      if (bridge != nullptr && isThunderboltBridge(*bridge)) {
        if (tbBridges++ == 0) firstBridge = b;
      }
    }
    // The host controller's upstream and downstream ports are above its own NHI and xHCI and
    // above everything it tunnels: a device below both that is not one of the controller's own
    // functions, or below a third (a dock's or an enclosure's), is tunnelled.
    if (tbBridges >= 3 || (tbBridges == 2 && !isControllerFunction(d))) {
      d.thunderbolt = true;
      d.thunderboltWhy = "below Thunderbolt bridge " + firstBridge;
    } else if (haveDomain && d.removable == Removable::Removable) {
      d.thunderbolt = true;
      d.thunderboltWhy = "removable port on a host with a Thunderbolt/USB4 domain";
    }
  }
}

namespace {

void storageUse(const HostFacts& host, const PciDevice& dev, const std::string& rootDev,
                std::vector<InUseReason>& reasons) {
  for (const auto& ctrl : dev.nvme) {
    for (const auto& ns : ctrl.namespaces) {
      blockUse(host, ns.disk, rootDev, reasons, "", 0);
      for (const auto& part : ns.partitions) blockUse(host, part, rootDev, reasons, "", 0);
    }
  }
}

void networkUse(const PciDevice& dev, std::vector<InUseReason>& reasons) {
  for (const auto& nd : dev.netdevs) {
    if (!nd.master.empty()) reasons.push_back({Kind::NetMaster, nd.name + " is enslaved to " + nd.master});
    // A NIC that is up but has no address or route carries no traffic that a rebind would cut.
    if (nd.up && nd.hasRoute) reasons.push_back({Kind::NetRoute, nd.name + " is up and carries routes"});
    if (nd.up && nd.hasGlobalAddress) reasons.push_back({Kind::NetAddress, nd.name + " is up with IPv6 addresses"});
  }
}

}  // namespace

void assessUse(HostFacts& host) {
  std::string rootDev;
  for (const auto& m : host.mounts) {
    if (m.mountPoint == "/") rootDev = m.devNum;
  }
  for (auto& dev : host.devices) {
    std::vector<InUseReason> reasons;
    storageUse(host, dev, rootDev, reasons);
    networkUse(dev, reasons);
    if (dev.driver == "vfio-pci") {
      reasons.push_back({Kind::Vfio,
                         "bound to vfio-pci: a VM or user-space driver owns it; unbinding "
                         "blocks until it lets go"});
    }
    if (dev.sriovNumVfs > 0) {
      reasons.push_back({Kind::SriovVfs, std::to_string(dev.sriovNumVfs) +
                                             " SR-IOV virtual functions enabled: unbinding destroys them"});
    }
    // Duplicates arise when a partition and its disk reach the same holder.
    std::vector<InUseReason> unique;
    for (auto& r : reasons) {
      if (std::find(unique.begin(), unique.end(), r) == unique.end()) unique.push_back(std::move(r));
    }
    dev.inUse = std::move(unique);
  }
}

}  // namespace iommud::core
