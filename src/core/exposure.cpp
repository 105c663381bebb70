#include "core/exposure.hpp"

#include <algorithm>

#include "core/cmdline.hpp"

namespace iommud::core {
namespace {

using Src = Reason::Source;

std::string groupName(int id) {
  return "group " + std::to_string(id);
}

// Why the boot default is what it is: the mode's own chain (firmware, config, command line,
// drivers), which every device of a group at the default shares.
void bootDefault(const HostMode& m, std::vector<Reason>& out) {
  out.insert(out.end(), m.reasons.begin(), m.reasons.end());
}

const DomainChangeMade* lastChange(const std::vector<DomainChangeMade>& changes, int group) {
  const DomainChangeMade* found = nullptr;
  for (const auto& c : changes) {
    if (c.group == group) found = &c;
  }
  return found;
}

// Why a group's type is what it is: the boot default, or what changed it since.
void groupType(const HostMode& m, const Group& g, const std::vector<DomainChangeMade>& changes,
               std::vector<Reason>& out) {
  auto type = std::string(toString(*g.type));
  bool atDefault = m.defaultType && *m.defaultType == *g.type;
  if (atDefault) bootDefault(m, out);
  if (const auto* c = lastChange(changes, g.id); c != nullptr && c->to == type) {
    out.push_back({Src::Iommud, "iommud set " + groupName(g.id) + " from " + c->from + " to " + c->to + " by rule " +
                                    c->rule + " (" + c->ruleWhere + ")"});
  } else if (auto notes = m.groupNotes.find(g.id); notes != m.groupNotes.end()) {
    for (const auto& n : notes->second) out.push_back({Src::Group, n});
  }
  out.push_back({Src::Group, groupName(g.id) + " reads " + type + (atDefault ? " (the boot default)" : "") +
                                 (g.devices.size() > 1 ? ", shared by " + std::to_string(g.devices.size()) +
                                                             " devices that can reach each other's mappings"
                                                       : "")});
}

// The last `<module>.disable_bypass=` of the command line (the kernel's parameq() takes '-' and
// '_' alike), as kstrtobool reads it; nullopt when absent or unreadable.
std::optional<bool> disableBypass(const HostFacts& h, std::string_view module) {
  std::optional<bool> out;
  for (const auto& p : parseCmdline(h.kernel.cmdline)) {
    std::string key = p.key;
    std::replace(key.begin(), key.end(), '-', '_');
    if (key == std::string(module) + ".disable_bypass") out = parseKernelBool(p.value.value_or("1"));
  }
  return out;
}

// A device in no group has no domain: what its IOMMU does with a stream it was never told about
// (docs/kernel.md §4.1).
Exposure outsideGroups(const HostFacts& h, const HostMode& m, std::vector<Reason>& why) {
  switch (m.vendor) {
    case Vendor::ArmSmmuV3:
      if (disableBypass(h, "arm_smmu_v3") != false) {
        why.push_back({Src::Device,
                       "the device is in no IOMMU group (on arm64 a device gets one when a driver binds): the SMMUv3 "
                       "aborts the DMA of a stream with no domain attached (arm-smmu-v3 disable_bypass, on by "
                       "default; no bypass at all in later kernels)"});
        return Exposure::None;
      }
      why.push_back({Src::Cmdline,
                     "arm-smmu-v3.disable_bypass=0 on the command line: the SMMUv3 lets a stream with no domain "
                     "attached bypass it"});
      break;
    case Vendor::ArmSmmu:
      if (h.kernel.config.contains("CONFIG_ARM_SMMU_DISABLE_BYPASS_BY_DEFAULT") &&
          h.kernel.config.at("CONFIG_ARM_SMMU_DISABLE_BYPASS_BY_DEFAULT") == "y" &&
          disableBypass(h, "arm_smmu") != false) {
        why.push_back({Src::Device,
                       "the device is in no IOMMU group: the SMMU faults the DMA of an unmatched stream "
                       "(CONFIG_ARM_SMMU_DISABLE_BYPASS_BY_DEFAULT=y, arm-smmu disable_bypass)"});
        return Exposure::None;
      }
      why.push_back({Src::Config,
                     "unmatched streams bypass this SMMU unless CONFIG_ARM_SMMU_DISABLE_BYPASS_BY_DEFAULT=y and "
                     "no arm-smmu.disable_bypass=0 (the kernel config is not known, or says otherwise)"});
      break;
    default: break;
  }
  why.push_back({Src::Device,
                 "the device is in no IOMMU group: no IOMMU translates its DMA (not in the "
                 "firmware table's scope, or its driver bypasses the IOMMU)"});
  return Exposure::AllMemory;
}

// What a translated device's exposure means, in words.
void whatTheLevelMeans(Exposure level, bool untrusted, const std::string& untrustedWhy, std::vector<Reason>& why) {
  switch (level) {
    case Exposure::AllMemory:
      why.push_back({Src::Device, "identity maps all memory 1:1: the device can read and write all memory"});
      break;
    case Exposure::MappedWindow:
      why.push_back({Src::Device, untrusted ? untrustedWhy +
                                                  ": sub-page mappings are bounced, but lazy invalidation leaves a "
                                                  "window after unmap"
                                            : "lazy invalidation (flush queue): a buffer stays reachable for a few "
                                              "milliseconds after unmap, until the batched IOTLB flush"});
      break;
    case Exposure::MappedSubPage:
      why.push_back({Src::Device, untrustedWhy + ": strict invalidation, and sub-page buffers are bounced through "
                                                 "swiotlb so the device never sees their neighbours"});
      break;
    case Exposure::Mapped:
      why.push_back({Src::Device, "strict invalidation: a buffer is unreachable once unmapped"});
      break;
    case Exposure::None: why.push_back({Src::Device, "a blocking domain: the device can do no DMA"}); break;
    case Exposure::Unknown: break;
  }
}

DeviceExposure exposureOf(const HostFacts& h, const HostMode& m, const PciDevice& d,
                          const std::vector<DomainChangeMade>& changes) {
  DeviceExposure e;
  e.address = d.address;
  auto& why = e.reasons;
  if (!dmaMaster(d)) {
    why.push_back({Src::Device,
                   "a host bridge (class 0x0600): the root complex's own function, which completes DMA "
                   "and initiates none"});
    e.level = Exposure::None;
    return e;
  }
  if (!m.present) {
    bootDefault(m, why);
    if (h.firmware.ivrs && h.firmware.ivrs->hostTranslationDisabled()) {
      why.push_back({Src::Firmware,
                     "IVRS sets HATDis: the AMD IOMMU remaps interrupts only and translates no DMA "
                     "(docs/kernel.md §11.2)"});
    }
    why.push_back({Src::Device, "no IOMMU translates DMA on this host: the device can read and write all memory"});
    e.level = Exposure::AllMemory;
    return e;
  }
  const Group* g = d.group ? h.group(*d.group) : nullptr;
  if (g == nullptr) {
    e.level = outsideGroups(h, m, why);
    return e;
  }
  if (d.driver == "vfio-pci") {
    why.push_back({Src::Device,
                   "bound to vfio-pci: its DMA goes through a VFIO/iommufd domain that maps what "
                   "the VM or the user-space driver mapped, strict; `type` (" +
                       g->typeText + ") names only the default domain it returns to"});
    e.level = Exposure::Mapped;
    return e;
  }
  if (!g->type || *g->type == DomainType::Unknown || *g->type == DomainType::Unmanaged) {
    why.push_back(
        {Src::Group, groupName(g->id) + " reads \"" + g->typeText + "\": not a default domain iommud can judge"});
    e.level = Exposure::Unknown;
    return e;
  }
  groupType(m, *g, changes, why);
  bool untrusted = d.untrusted();
  std::string untrustedWhy = "untrusted (" + (d.thunderbolt ? d.thunderboltWhy : std::string("removable")) + ")";
  e.level = exposureOfType(*g->type, untrusted).value_or(Exposure::Unknown);
  whatTheLevelMeans(e.level, untrusted, untrustedWhy, why);
  return e;
}

// A virtio device that did not negotiate VIRTIO_F_ACCESS_PLATFORM is handed guest-physical
// addresses, never an IOVA: whatever its group's type, the IOMMU maps nothing for it and the
// device model behind it reaches the whole guest (docs/kernel.md §4.3).
void virtioBypass(const VirtioChild& v, DeviceExposure& e) {
  // What the group's translation would have meant does not hold for a device it never sees.
  bool translated =
      e.level == Exposure::Mapped || e.level == Exposure::MappedWindow || e.level == Exposure::MappedSubPage;
  if (translated && !e.reasons.empty()) e.reasons.pop_back();
  e.reasons.push_back({Src::Device, v.name +
                                        " did not negotiate VIRTIO_F_ACCESS_PLATFORM (features bit 33): the virtio "
                                        "driver gives it physical addresses without the DMA API, so the IOMMU maps "
                                        "nothing for it and it reaches all of the guest's memory, whatever its group"});
  e.level = Exposure::AllMemory;
}

}  // namespace

std::string_view toString(Exposure exposure) {
  return nameOf(kExposureNames, exposure);
}

std::string_view describe(Exposure exposure) {
  switch (exposure) {
    case Exposure::AllMemory: return "can reach all memory";
    case Exposure::MappedWindow: return "mapped buffers, with a window after unmap";
    case Exposure::Mapped: return "mapped buffers only";
    case Exposure::MappedSubPage: return "mapped buffers only, isolated below a page";
    case Exposure::None: return "no DMA";
    case Exposure::Unknown: break;
  }
  return "unknown";
}

bool dmaMaster(const PciDevice& d) {
  // Class 06h/00h, the host bridge: the CPU side of the root complex (PCI Code and ID Assignment
  // spec), the target of the DMA of others. No other class is certain: an ISA bridge has its 8237.
  return (d.classCode >> 8) != 0x0600;
}

std::optional<Exposure> exposureOfType(DomainType type, bool untrusted) {
  switch (type) {
    case DomainType::Identity: return Exposure::AllMemory;
    // Untrusted devices bounce whatever the invalidation (docs/kernel.md §5); DMA-FQ on one is
    // possible from 6.4 by a live write, and its window stays.
    case DomainType::DmaFq: return Exposure::MappedWindow;
    case DomainType::Dma: return untrusted ? Exposure::MappedSubPage : Exposure::Mapped;
    case DomainType::Blocked: return Exposure::None;
    case DomainType::Unmanaged:
    case DomainType::Unknown: break;
  }
  return std::nullopt;
}

bool wider(Exposure to, Exposure from) {
  auto rank = [](Exposure x) {
    switch (x) {
      case Exposure::None: return 0;
      case Exposure::MappedSubPage: return 1;
      case Exposure::Mapped: return 2;
      case Exposure::MappedWindow: return 3;
      case Exposure::AllMemory: return 4;
      case Exposure::Unknown: break;
    }
    return -1;
  };
  return rank(to) >= 0 && rank(from) >= 0 && rank(to) > rank(from);
}

std::vector<DeviceExposure> exposures(const HostFacts& host, const HostMode& mode,
                                      const std::vector<DomainChangeMade>& changes) {
  std::vector<DeviceExposure> out;
  out.reserve(host.devices.size());
  for (const auto& d : host.devices) {
    out.push_back(exposureOf(host, mode, d, changes));
    if (d.bypassesDmaApi()) virtioBypass(*d.virtio, out.back());
  }
  return out;
}

std::vector<std::string> reachAllMemory(const HostFacts& host, const std::vector<DeviceExposure>& exposures) {
  std::vector<std::string> out;
  for (const auto& e : exposures) {
    if (e.level != Exposure::AllMemory) continue;  // before the lookup: most devices are not at this level
    const auto* d = host.device(e.address);
    if (d != nullptr && d->kind() != DeviceKind::Bridge) out.push_back(e.address);
  }
  return out;
}

}  // namespace iommud::core
