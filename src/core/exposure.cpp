#include "core/exposure.hpp"

#include <algorithm>

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

DeviceExposure exposureOf(const HostFacts& h, const HostMode& m, const PciDevice& d,
                          const std::vector<DomainChangeMade>& changes) {
  DeviceExposure e;
  e.address = d.address;
  auto& why = e.reasons;
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
    why.push_back({Src::Device,
                   "the device is in no IOMMU group: no IOMMU translates its DMA (not in the "
                   "firmware table's scope, or its driver bypasses the IOMMU)"});
    e.level = Exposure::AllMemory;
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
  switch (e.level) {
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
  return e;
}

}  // namespace

std::string_view toString(Exposure exposure) {
  switch (exposure) {
    case Exposure::AllMemory: return "all-memory";
    case Exposure::MappedWindow: return "mapped-window";
    case Exposure::Mapped: return "mapped";
    case Exposure::MappedSubPage: return "mapped-subpage";
    case Exposure::None: return "none";
    case Exposure::Unknown: break;
  }
  return "unknown";
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
  for (const auto& d : host.devices) out.push_back(exposureOf(host, mode, d, changes));
  return out;
}

std::vector<std::string> reachAllMemory(const HostFacts& host, const std::vector<DeviceExposure>& exposures) {
  std::vector<std::string> out;
  for (const auto& e : exposures) {
    const auto* d = host.device(e.address);
    if (e.level == Exposure::AllMemory && d != nullptr && d->kind() != DeviceKind::Bridge) out.push_back(e.address);
  }
  return out;
}

}  // namespace iommud::core
