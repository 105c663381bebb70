#include "core/protections.hpp"

#include <algorithm>
#include <set>

#include "core/cmdline.hpp"

namespace iommud::core {
namespace {

using State = Protection::State;

bool anyIntel(const HostFacts& h, bool (IntelCaps::*bit)() const) {
  return std::any_of(h.units.begin(), h.units.end(),
                     [&](const IommuUnit& u) { return u.intel && ((*u.intel).*bit)(); });
}

bool intelUnits(const HostFacts& h) {
  return std::any_of(h.units.begin(), h.units.end(), [](const IommuUnit& u) { return u.intel.has_value(); });
}

const PciDevice* thunderboltNhi(const HostFacts& h) {
  for (const auto& d : h.devices) {
    if (d.classCode == 0x0c0340 || d.driver == "thunderbolt") return &d;
  }
  return nullptr;
}

Protection preBootDma(const HostFacts& h) {
  Protection p{"pre-boot-dma", State::Unknown, "", ""};
  const auto& fw = h.firmware;
  std::string tb;
  for (const auto& t : h.thunderbolt) {
    tb += "; Thunderbolt " + t.name + " iommu_dma_protection " +
          (t.iommuDmaProtection ? (*t.iommuDmaProtection ? "1" : "0") : std::string("unknown"));
  }
  if (const auto* nhi = thunderboltNhi(h); nhi != nullptr && !h.thunderbolt.empty() && nhi->group) {
    const auto* g = h.group(*nhi->group);
    if (g != nullptr && g->type == DomainType::Identity) {
      tb += " (the NHI " + nhi->address + " is in identity: the kernel reports 0 when its IOMMU does not translate it)";
    }
  }
  if (fw.dmar) {
    p.state = fw.dmar->platformOptIn() ? State::On : State::Off;
    p.text = std::string("DMAR ") + (fw.dmar->platformOptIn() ? "sets" : "does not set") +
             " DMA_CTRL_PLATFORM_OPT_IN: the firmware " + (fw.dmar->platformOptIn() ? "kept" : "did not keep") +
             " devices away from memory before the kernel started" + tb;
  } else if (fw.ivrs) {
    p.state = fw.ivrs->dmaRemapOptIn() ? State::On : State::Off;
    p.text = std::string("IVRS IVinfo ") + (fw.ivrs->dmaRemapOptIn() ? "sets" : "does not set") +
             " DMA remap support: the firmware " + (fw.ivrs->dmaRemapOptIn() ? "used" : "did not use") +
             " the IOMMU against DMA before the kernel started" + tb;
  } else {
    bool tables = std::any_of(fw.tables.begin(), fw.tables.end(),
                              [](const std::string& t) { return t == "DMAR" || t == "IVRS"; });
    p.text = (tables ? std::string("the DMAR/IVRS table is not readable (root only)")
                     : std::string("no DMAR or IVRS table")) +
             tb;
  }
  if (p.state == State::Off) {
    p.advice = R"(Enable "Kernel DMA Protection" / "Pre-boot DMA protection" in the firmware setup, if it has it)";
  }
  return p;
}

bool arm64(const HostFacts& h) {
  return h.kernel.arch == Arch::Arm64;
}

// Interrupt remapping and x2APIC are the x86 IOMMUs' and APIC's: arm64 has msi-isolation instead.
Protection x86Only(std::string id) {
  return {std::move(id), State::NotApplicable,
          "an x86 notion: on arm64 the GIC's ITS keeps devices from raising each other's interrupts "
          "(msi-isolation)",
          ""};
}

// VT-d's interrupt remapping: the kernel enables it only when the units have ecap.IR and DMAR
// sets INTR_REMAP (docs/kernel.md §11.1); the table is root-only.
void intelInterruptRemapping(const HostFacts& h, Protection& p) {
  const auto& fw = h.firmware;
  bool ecap = anyIntel(h, &IntelCaps::interruptRemapping);
  p.state = !ecap ? State::Off : !fw.dmar ? State::Unknown : fw.dmar->interruptRemapping() ? State::On : State::Off;
  p.text = std::string("the VT-d units ") + (ecap ? "support" : "do not support") + " it (ecap.IR)" +
           (fw.dmar ? std::string(", DMAR ") + (fw.dmar->interruptRemapping() ? "sets" : "does not set") + " INTR_REMAP"
                    : std::string("; whether DMAR allows it (INTR_REMAP) is readable by root only")) +
           (p.state == State::On ? "; the kernel logs \"DMAR-IR: Enabled IRQ remapping\"" : "");
}

Protection interruptRemapping(const HostFacts& h) {
  if (arm64(h)) return x86Only("interrupt-remapping");
  Protection p{"interrupt-remapping", State::Unknown, "", ""};
  const auto params = parseCmdline(h.kernel.cmdline);
  bool intremapOff = std::any_of(params.begin(), params.end(),
                                 [](const auto& param) { return param.key == "intremap" && param.value == "off"; });
  if (intremapOff) {
    p.state = State::Off;
    p.text = "intremap=off on the command line: a device can send any interrupt message it likes";
  } else if (intelUnits(h)) {
    intelInterruptRemapping(h, p);
  } else if (h.firmware.ivrs || h.vendor() == Vendor::Amd) {
    p.text =
        "AMD-Vi remaps interrupts when the kernel says \"AMD-Vi: Interrupt remapping enabled\"; the sysfs "
        "attributes do not tell";
  } else {
    p.state = h.iommuPresent() ? State::Unknown : State::Off;
    p.text = h.iommuPresent() ? "not told by this IOMMU's attributes" : "no IOMMU: no interrupt remapping";
  }
  if (p.state == State::Off) p.advice = "VFIO device assignment needs it (or vfio_iommu_type1.allow_unsafe_interrupts)";
  return p;
}

Protection x2apic(const HostFacts& h) {
  if (arm64(h)) return x86Only("x2apic");
  Protection p{"x2apic", State::Unknown, "", ""};
  if (intelUnits(h)) {
    bool eim = anyIntel(h, &IntelCaps::extendedInterruptMode);
    bool optOut = h.firmware.dmar && h.firmware.dmar->x2apicOptOut();
    p.state = !eim ? State::Off : !h.firmware.dmar ? State::Unknown : optOut ? State::Off : State::On;
    p.text = std::string("the VT-d units ") + (eim ? "support" : "do not support") +
             " x2APIC interrupt remapping (ecap.EIM)" + (optOut ? "; DMAR sets X2APIC_OPT_OUT" : "");
  } else if (h.firmware.ivrs) {
    bool xt = std::any_of(h.firmware.ivrs->ivhds.begin(), h.firmware.ivrs->ivhds.end(),
                          [](const IvhdInfo& i) { return i.x2apic(); });
    p.state = xt ? State::On : State::Off;
    p.text = std::string("the IVRS EFR copy ") + (xt ? "sets" : "does not set") + " XTSup";
  } else {
    p.text = "not told by this IOMMU's attributes or tables";
  }
  return p;
}

// arm64's interrupt remapping: the GICv3/v4 ITS translates a message by the DeviceID the bus
// gives it, so a device reaches only the interrupts mapped for it (docs/kernel.md §4.2).
Protection msiIsolation(const HostFacts& h) {
  Protection p{"msi-isolation", State::Unknown, "", ""};
  // Since 6.2 the chips are per device ("GICv2m-PCI-MSIX-0000:00:01.0", "ITS-PCI-MSI-0000:01:00.0"):
  // said by their frame ("GICv2m", "ITS") and how many there are, not one by one.
  std::set<std::string> its;
  std::set<std::string> others;  // GICv2m ("MSI", "GICv2m-..."), the GICv3 MBI: no DeviceID, no isolation
  size_t itsChips = 0;
  size_t otherChips = 0;
  for (const auto& chip : h.irqChips) {
    const std::string frame = chip.substr(0, chip.find("-PCI"));
    if (chip.starts_with("ITS-")) {
      its.insert(frame);
      ++itsChips;
    } else if (chip.find("MSI") != std::string::npos || chip.find("v2m") != std::string::npos ||
               chip.find("MBI") != std::string::npos) {
      others.insert(frame);
      ++otherChips;
    }
  }
  auto said = [](const std::set<std::string>& frames, size_t chips) {
    std::string out;
    for (const auto& f : frames) out += (out.empty() ? "" : ", ") + f;
    return chips > frames.size() ? out + " (" + std::to_string(chips) + " interrupt domains)" : out;
  };
  if (!others.empty()) {
    p.state = State::Off;
    p.text = "MSIs go through " + said(others, otherChips) +
             ", which takes a message from any device for any of its interrupts: a device can raise another's" +
             (its.empty() ? std::string() : " (others go through the ITS: " + said(its, itsChips) + ")");
    p.advice =
        "VFIO device assignment needs an ITS (or vfio_iommu_type1.allow_unsafe_interrupts); a GICv2m or "
        "MBI frame cannot isolate";
  } else if (!its.empty()) {
    p.state = State::On;
    p.text = "MSIs go through the GIC's ITS (" + said(its, itsChips) +
             "): it takes a device's message only for the interrupts mapped to that device's ID, the "
             "isolation VFIO asks for";
  } else {
    p.text = "no interrupt chip serves MSIs yet (no driver asked for one), or /sys/kernel/irq is not readable";
  }
  return p;
}

Protection hostTranslation(const HostFacts& h) {
  Protection p{"host-translation", State::Unknown, "", ""};
  if (h.firmware.ivrs && h.firmware.ivrs->hostTranslationDisabled()) {
    p.state = State::Off;
    p.text =
        "IVRS sets HATDis: the firmware disables host address translation, so the AMD IOMMU only remaps "
        "interrupts (no groups, no ivhdN); every device can reach all memory";
    p.advice = "A firmware setting or update; the kernel cannot turn it on";
    return p;
  }
  // Off, or absent: nothing translates, whatever the firmware's tables say.
  if (!h.iommuPresent()) {
    p.state = State::Off;
    p.text = "no IOMMU is in use: nothing translates DMA";
    p.advice = "Turn the IOMMU on: the iommu-off finding says how, and what it costs";
    return p;
  }
  p.state = State::On;
  p.text = h.firmware.ivrs ? "IVRS does not set HATDis" : "the IOMMU translates DMA";
  return p;
}

Protection acsOverride(const HostFacts& h) {
  Protection p{"acs-isolation", State::On,
               "the groups are as the hardware isolates them (no pcie_acs_override= on the command line)", ""};
  for (const auto& param : parseCmdline(h.kernel.cmdline)) {
    if (param.key != "pcie_acs_override") continue;
    p.state = State::Weakened;
    p.text = param.text +
             " (an out-of-tree patch): the kernel pretends ports and functions isolate peer-to-peer traffic; "
             "groups no longer tell which devices can reach each other's memory";
    p.advice = "Remove it, and move devices that must be apart to slots behind ports with ACS";
  }
  return p;
}

// The members of a group and the bridges above each, nearest first, each once.
std::vector<std::string> pathsOf(const HostFacts& h, const Group& g) {
  std::vector<std::string> path;
  for (const auto& a : g.devices) {
    const auto* d = h.device(a);
    if (d == nullptr) continue;
    path.push_back(a);
    path.insert(path.end(), d->bridges.rbegin(), d->bridges.rend());
  }
  std::vector<std::string> once;
  for (auto& a : path) {
    if (std::find(once.begin(), once.end(), a) == once.end()) once.push_back(std::move(a));
  }
  return once;
}

std::string sharedGroupText(const SharedGroup& s) {
  std::string text;
  if (!s.withoutAcs.empty()) {
    text = "no ACS isolation (SV, RR, CR, UF) at ";
    for (size_t i = 0; i < s.withoutAcs.size(); ++i) text += (i ? ", " : "") + s.withoutAcs[i];
    text += ": peer-to-peer traffic is not forced up to the IOMMU there";
  } else if (!s.unknown.empty()) {
    text = "unknown: the config space of the paths is readable by root only";
  } else {
    text =
        "every function on the paths isolates; the kernel joined them for another reason (a DMA alias, "
        "a conventional PCI bridge, or a quirk)";
  }
  if (!s.unknown.empty() && !s.withoutAcs.empty()) text += " (some functions could not be read)";
  return text;
}

std::vector<SharedGroup> sharedGroups(const HostFacts& h) {
  std::vector<SharedGroup> out;
  for (const auto& g : h.groups) {
    if (g.devices.size() < 2) continue;
    SharedGroup s;
    s.group = g.id;
    for (const auto& a : pathsOf(h, g)) {
      const auto* d = h.device(a);
      if (d == nullptr) continue;
      auto isolates = d->config ? acsEnabled(*d->config, kAcsIsolationFlags) : std::nullopt;
      if (!isolates) {
        s.unknown.push_back(a);
      } else if (!*isolates) {
        s.withoutAcs.push_back(a);
      }
    }
    s.text = sharedGroupText(s);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<VfioReadiness> vfioReadiness(const HostFacts& h, const Protection* ir) {
  std::vector<VfioReadiness> out;
  for (const auto& g : h.groups) {
    VfioReadiness v;
    v.group = g.id;
    bool endpoint = false;
    for (const auto& a : g.devices) {
      const auto* d = h.device(a);
      if (d == nullptr) continue;
      if (d->kind() != DeviceKind::Bridge) endpoint = true;
      if (d->driver && *d->driver != "vfio-pci" && *d->driver != "pcieport") {
        v.blockers.push_back(a + " is bound to " + *d->driver);
      }
    }
    if (!endpoint) continue;
    if (ir != nullptr && ir->state == State::Off) {
      v.blockers.emplace_back(arm64(h) ? "MSIs not isolated" : "no interrupt remapping");
    }
    v.viable = v.blockers.empty();
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

std::string_view toString(Protection::State state) {
  return nameOf(kProtectionStateNames, state);
}

Protections protections(const HostFacts& host, const HostMode& /*mode*/) {
  Protections p;
  p.host = {preBootDma(host), interruptRemapping(host), x2apic(host), hostTranslation(host), acsOverride(host)};
  if (arm64(host)) p.host.push_back(msiIsolation(host));
  p.shared = sharedGroups(host);
  p.vfio = vfioReadiness(host, interruptIsolation(host, p));
  return p;
}

const Protection* interruptIsolation(const HostFacts& host, const Protections& p) {
  const std::string id = arm64(host) ? "msi-isolation" : "interrupt-remapping";
  auto it = std::find_if(p.host.begin(), p.host.end(), [&](const Protection& x) { return x.id == id; });
  return it == p.host.end() ? nullptr : &*it;
}

}  // namespace iommud::core
