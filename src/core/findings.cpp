#include "core/findings.hpp"

#include <algorithm>

namespace iommud::core {
namespace {

const char* const kIdentityCost =
    "these devices can read and write all of physical memory: a faulty or compromised device or firmware is "
    "no longer contained";
const char* const kLazyCost =
    "after the driver frees a buffer the device can still reach it for a few milliseconds, until the batched "
    "IOTLB flush";

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// "0000:01:00.0 (nvme0)" or just the address.
std::string label(const PciDevice& d) {
  auto name = d.displayName();
  return name == d.address ? d.address : d.address + " (" + name + ")";
}

std::vector<const PciDevice*> endpoints(const HostFacts& h, const Group& g) {
  std::vector<const PciDevice*> out;
  for (const auto& a : g.devices) {
    const auto* d = h.device(a);
    if (d != nullptr && d->kind() != DeviceKind::Bridge) out.push_back(d);
  }
  return out;
}

void vtdIotlbSyncMap(const HostFacts& h, const HostMode& m, std::vector<Finding>& out) {
  if (m.vendor != Vendor::Intel || !h.kernel.upstream.version) return;
  const auto& v = *h.kernel.upstream.version;
  if (!iotlbSyncMapAffected().contains(v)) return;
  // With caching mode or RWBF the flush on map is genuinely needed; the fix changes nothing there.
  bool noopFlush = std::any_of(h.units.begin(), h.units.end(), [](const IommuUnit& u) {
    return u.intel && !u.intel->cachingMode() && !u.intel->rwbf();
  });
  // A chipset on the kernel's RWBF quirk list forces the flush whatever the register says
  // (docs/kernel.md §3); the kernel ignores the quirk on an untrusted device.
  bool rwbfQuirk = std::any_of(h.devices.begin(), h.devices.end(), [](const PciDevice& d) {
    return !d.untrusted() && needsRwbfQuirk(d.vendorId, d.deviceId);
  });
  if (!noopFlush || rwbfQuirk) return;
  for (const auto& g : h.groups) {
    if (!g.type || !isTranslated(*g.type)) continue;
    auto eps = endpoints(h, g);
    if (eps.size() < 2) continue;
    int nvmes = static_cast<int>(
        std::count_if(eps.begin(), eps.end(), [](const PciDevice* d) { return d->kind() == DeviceKind::Nvme; }));
    Finding f;
    f.id = "vtd-iotlb-sync-map";
    f.severity = nvmes >= 2 ? Severity::Warning : Severity::Info;
    f.title = "VT-d map path contends on one lock for group " + std::to_string(g.id);
    std::vector<std::string> names;
    for (const auto* d : eps) {
      names.push_back(label(*d));
      f.devices.push_back(d->address);
    }
    f.groups.push_back(g.id);
    f.summary = "Kernel " + v.str() +
                " has the VT-d iotlb_sync_map regression (since 6.10; fixed in 6.17, 6.16.2, "
                "6.15.11 and 6.12.43): every DMA map takes the domain's cache-tag lock for a flush that does nothing "
                "on this IOMMU (no Caching Mode, no RWBF). The " +
                std::to_string(eps.size()) + " devices of group " + std::to_string(g.id) + " (" + join(names) +
                ") share one domain and so contend on that lock; two "
                "NVMe drives behind one bridge fell from about 6150 to 4985 MiB/s. A distribution kernel may carry "
                "the fix under an older version number (look for \"iommu/vt-d: Optimize iotlb_sync_map for "
                "non-caching/non-RWBF modes\" in its changelog).";
    f.remedies.push_back({"Run a kernel with the fix: 6.17 or later, 6.16.2+, 6.15.11+ or 6.12.43+",
                          "none: DMA protection stays as it is"});
    f.remedies.push_back({"Set group " + std::to_string(g.id) +
                              " to identity (an iommud policy, applied before the "
                              "devices are in use)",
                          kIdentityCost});
    f.remedies.push_back({"Move the devices to slots in different IOMMU groups", "none"});
    out.push_back(std::move(f));
  }
}

void untrustedBounce(const HostFacts& h, const HostMode& /*m*/, std::vector<Finding>& out) {
  const auto& cl = h.kernel.iommuCmdline;
  bool swiotlbOff = cl.swiotlbNoforce || h.swiotlb.nslabs == 0U;
  for (const auto& d : h.devices) {
    auto kind = d.kind();
    if ((kind != DeviceKind::Nic && kind != DeviceKind::Nvme) || !d.untrusted() || !d.group) continue;
    const auto* g = h.group(*d.group);
    if (g == nullptr || !g->type || !isTranslated(*g->type)) continue;
    Finding f;
    f.id = "untrusted-bounce";
    f.severity = Severity::Warning;
    f.title = label(d) + " is untrusted: strict DMA with bounce buffers";
    std::string why = d.thunderbolt ? "is behind a Thunderbolt/USB4 tunnel (" + d.thunderboltWhy + ")"
                                    : "sits behind a removable, external-facing port";
    f.summary = label(d) + (d.driver ? ", driver " + *d.driver + "," : std::string()) + " " + why +
                ". The kernel treats it as untrusted: its group " + std::to_string(*d.group) +
                " is translated with strict invalidation, every mapping smaller than a page is bounced through "
                "swiotlb so the device cannot see the data next to it, and the kernel refuses identity for it. "
                "A driver that maps one small buffer per descriptor pays for a remap and a copy on every frame: "
                "an AQC100 10 GbE Thunderbolt NIC received 2.26 Gbit/s this way, 9.28 Gbit/s with the IOMMU off.";
    if (swiotlbOff) {
      f.summary +=
          " swiotlb is inactive on this host, so such unaligned mappings fail (\"DMA bounce buffers are "
          "inactive\").";
    }
    f.devices.push_back(d.address);
    f.groups.push_back(*d.group);
    if (kind == DeviceKind::Nic) {
      f.remedies.push_back(
          {"Raise the RX/TX rings to their maximum and use interrupt coalescing (an iommud policy "
           "applies this at hotplug)",
           "none: the device stays isolated"});
      f.remedies.push_back(
          {"Use larger RX buffers where the driver offers it (mainline atlantic has no RX "
           "page-order parameter)",
           "none"});
    }
    // Passthrough is no way out: the kernel keeps untrusted devices on strict DMA regardless. Only
    // x86 has command-line parameters that turn the IOMMU off (docs/kernel.md §1.5).
    std::string off =
        h.kernel.arch == Arch::X86 || h.kernel.arch == Arch::Unknown
            ? "Turn the IOMMU off (intel_iommu=off or amd_iommu=off; iommu=pt does not help, the kernel "
              "keeps untrusted devices translated)"
            : "Turn the IOMMU off in the firmware setup (this kernel has no command-line parameter that turns it "
              "off; iommu.passthrough=1 does not help, the kernel keeps untrusted devices translated)";
    f.remedies.push_back({off,
                          "every device, including this hot-pluggable one, can then read and write all memory: "
                          "anyone who plugs in a malicious Thunderbolt/USB4 device owns the machine"});
    out.push_back(std::move(f));
  }
}

// An untrusted device without a swiotlb pool: its sub-page mappings cannot be bounced, so the kernel
// fails them (docs/kernel.md §5, §6): a finding of its own, since the device does not work at all.
void untrustedNoBounceBuffers(const HostFacts& h, const HostMode& /*m*/, std::vector<Finding>& out) {
  const auto& cl = h.kernel.iommuCmdline;
  if (!cl.swiotlbNoforce && h.swiotlb.nslabs != 0U) return;
  for (const auto& d : h.devices) {
    if (d.kind() == DeviceKind::Bridge || !d.untrusted() || !d.group) continue;
    const auto* g = h.group(*d.group);
    if (g == nullptr || !g->type || !isTranslated(*g->type)) continue;
    Finding f;
    f.id = "untrusted-no-bounce-buffers";
    f.severity = Severity::Error;
    f.title = label(d) + " is untrusted and this host has no bounce buffers: its small mappings fail";
    f.summary = label(d) + (d.driver ? ", driver " + *d.driver + "," : std::string()) +
                " is untrusted, so the kernel must bounce every mapping smaller than a page through swiotlb; " +
                (cl.swiotlbNoforce ? "swiotlb=noforce turned the pool off"
                                   : "this host has no swiotlb pool (x86 sets one up only with memory above 4 GiB)") +
                ", so each such mapping fails instead (the kernel logs \"DMA bounce buffers are inactive, unable to "
                "map unaligned transaction\" once) and the driver gets a mapping error: a NIC typically cannot "
                "bring its link up.";
    f.devices.push_back(d.address);
    f.groups.push_back(*d.group);
    if (cl.swiotlbNoforce) {
      f.remedies.push_back({"Remove swiotlb=noforce from the kernel command line", "none"});
    } else if (h.kernel.arch == Arch::X86 || h.kernel.arch == Arch::Unknown) {
      f.remedies.push_back(
          {"Boot with iommu=soft, which sets the swiotlb pool up (64 MiB by default) and leaves the IOMMU on (not "
           "swiotlb=force, which bounces every device's DMA)",
           "none: the device stays isolated, and only what needs bouncing is bounced"});
    } else {
      // iommu=soft is x86's; arm64 sets the pool up only for memory beyond its DMA zone, or when
      // forced (arch/arm64/mm/init.c mem_init(); docs/kernel.md §1.5).
      f.remedies.push_back(
          {"Boot with swiotlb=force: without memory beyond the DMA zone, the only way this kernel sets the swiotlb "
           "pool up",
           "every device's DMA is bounced through the pool, not only what needs it: a copy per "
           "transfer for all of them"});
    }
    out.push_back(std::move(f));
  }
}

// virtio devices without VIRTIO_F_ACCESS_PLATFORM bypass the IOMMU (docs/kernel.md §4.3). The
// hypervisor that emulates them sees the guest's memory anyway, unless the guest is confidential:
// then they are a hole in what it was built to keep. Without an IOMMU and outside such a guest
// every device reaches all memory alike, and iommu-off says so.
void virtioBypassesIommu(const HostFacts& h, const HostMode& m, std::vector<Finding>& out) {
  bool confidential = h.confidential != Confidential::None && h.confidential != Confidential::Unknown;
  if (!m.present && !confidential) return;
  Finding f;
  std::vector<std::string> names;
  for (const auto& d : h.devices) {
    if (!d.bypassesDmaApi()) continue;
    f.devices.push_back(d.address);
    names.push_back(label(d) + " (" + d.virtio->name + ")");
    if (d.group) f.groups.push_back(*d.group);
  }
  if (f.devices.empty()) return;
  f.id = "virtio-bypasses-iommu";
  f.severity = confidential ? Severity::Error : Severity::Info;
  f.title = confidential ? "virtio devices bypass the IOMMU in a confidential guest"
                         : "virtio devices bypass the IOMMU: the hypervisor reaches all guest memory through them";
  f.summary = join(names) +
              " did not negotiate VIRTIO_F_ACCESS_PLATFORM: the virtio driver hands them physical addresses "
              "without the DMA API, so no IOMMU maps for them and they reach all of the guest's memory, whatever "
              "their group says. ";
  f.summary += confidential
                   ? "This guest is " + std::string(toString(h.confidential)) +
                         ": its memory is hidden from the hypervisor, which such a device undoes or, where the "
                         "kernel checks (virtio_features_ok), keeps from working at all."
                   : "The hypervisor that emulates them sees the guest's memory anyway: the IOMMU in this guest "
                     "protects it from them only once they use the DMA API.";
  f.remedies.push_back(
      {"Give each device iommu_platform=on (QEMU: -device virtio-...-pci,iommu_platform=on; libvirt: <driver "
       "iommu='on'/> in the device's definition) and restart the guest",
       "none for security; every buffer is then mapped through the IOMMU: with a virtual IOMMU each map and unmap "
       "traps to the hypervisor, costing throughput, and a vhost backend needs device IOTLB support"});
  out.push_back(std::move(f));
}

void cachingMode(const HostFacts& h, const HostMode& /*m*/, std::vector<Finding>& out) {
  std::vector<std::string> units;
  for (const auto& u : h.units) {
    if ((u.intel && u.intel->cachingMode()) || (u.amd && u.amd->npCache())) units.push_back(u.name);
  }
  if (units.empty()) return;
  Finding f;
  f.id = "caching-mode";
  f.severity = Severity::Warning;
  f.title = "Emulated IOMMU: every map is flushed and invalidation is strict";
  f.summary = join(units) +
              " caches not-present entries (VT-d Caching Mode or AMD NpCache): this is a virtual "
              "IOMMU, as a hypervisor provides for device assignment inside a guest. The kernel must flush on every "
              "map, trapping to the hypervisor each time, and it forces strict invalidation for all translated groups.";
  for (const auto& g : h.groups) {
    if (g.type && isTranslated(*g.type)) f.groups.push_back(g.id);
  }
  f.remedies.push_back({"Set the groups of devices that are not handed to VFIO to identity (an iommud policy)",
                        "the guest kernel no longer isolates those devices from guest memory; the hypervisor still "
                        "confines the whole guest"});
  f.remedies.push_back(
      {"Remove the virtual IOMMU from the VM if nothing in the guest needs it (nested device "
       "assignment, DMA protection inside the guest)",
       "no DMA isolation inside the guest"});
  out.push_back(std::move(f));
}

void defaultOn(const HostFacts& h, const HostMode& m, std::vector<Finding>& out) {
  const auto& cl = h.kernel.iommuCmdline;
  if (!m.present || !m.defaultType || !isTranslated(*m.defaultType) || cl.passthrough) return;
  if (h.kernel.configSource.empty()) return;  // cannot tell where it came from
  std::string intelSymbol = intelDefaultOnSymbol(h.kernel);
  // On Intel, VT-d itself must have been turned on by the config, not by intel_iommu=on (or the
  // firmware's platform opt-in, which gives identity and so never reaches here).
  if (m.vendor == Vendor::Intel && (cl.intelOn == true || intelSymbol.empty())) return;
  Finding f;
  f.id = "default-on";
  f.severity = Severity::Info;
  f.title = "DMA translation is on by a kernel config default";
  std::string what = intelSymbol.empty() ? "" : intelSymbol + "=y turned VT-d on and ";
  f.summary = "Nobody asked for translation on the command line: " + what + "the kernel's default domain is " +
              std::string(toString(*m.defaultType)) +
              ". This protects memory from every device, at a cost distributions saw when they turned it on: TCP "
              "request/response latency 1.5-3% worse, and more for drivers that map many small buffers.";
  for (const auto& g : h.groups) {
    if (g.type && isTranslated(*g.type)) f.groups.push_back(g.id);
  }
  f.remedies.push_back({"Keep it: this is the safe default", "none"});
  f.remedies.push_back(
      {"Give identity or lazy DMA-FQ only to the internal devices whose throughput matters (an "
       "iommud policy)",
       std::string("identity: ") + kIdentityCost + "; DMA-FQ: " + kLazyCost});
  // iommu=pt is x86's (arch/x86/kernel/pci-dma.c); every architecture has the generic
  // iommu.passthrough= (docs/kernel.md §1.5).
  bool x86 = h.kernel.arch == Arch::X86;
  f.remedies.push_back({std::string(x86 ? "iommu=pt" : "iommu.passthrough=1") + " on the command line",
                        "every trusted device can read and write all memory; only untrusted (external) devices "
                        "stay translated"});
  out.push_back(std::move(f));
}

void smmuStrict(const HostFacts& h, const HostMode& m, std::vector<Finding>& out) {
  if (m.vendor != Vendor::ArmSmmu && m.vendor != Vendor::ArmSmmuV3) return;
  Finding f;
  for (const auto& g : h.groups) {
    if (g.type == DomainType::Dma) f.groups.push_back(g.id);
  }
  if (f.groups.empty()) return;
  f.id = "smmu-strict";
  f.severity = Severity::Info;
  f.title = "Arm SMMU in strict mode";
  f.summary =
      "Arm kernels default to strict invalidation: every unmap waits for the SMMU's TLB to be invalidated, "
      "and IOVA allocation sits on the hot path (an 82599 10 GbE NIC fell to 100 Mbit/s on one such host). "
      "Lazy DMA-FQ batches the invalidations.";
  f.remedies.push_back(
      {"Set the groups of internal NICs to DMA-FQ (possible with the driver bound since 5.15; an "
       "iommud policy)",
       kLazyCost});
  f.remedies.push_back({"iommu.strict=0 on the command line", std::string("for every device: ") + kLazyCost});
  out.push_back(std::move(f));
}

void vfioTranslated(const HostFacts& h, const HostMode& m, std::vector<Finding>& out) {
  for (const auto& g : h.groups) {
    std::vector<std::string> vfio;
    for (const auto& a : g.devices) {
      const auto* d = h.device(a);
      if (d != nullptr && d->driver == "vfio-pci") vfio.push_back(a);
    }
    if (vfio.empty()) continue;
    Finding f;
    f.id = "vfio-translated";
    f.severity = Severity::Info;
    f.title = "Group " + std::to_string(g.id) + " is owned by VFIO and stays translated";
    f.summary =
        join(vfio) +
        " is bound to vfio-pci: a VM or user-space driver maps its DMA through its own "
        "VFIO/iommufd domain. That domain is always translated" +
        std::string(m.passthrough != true          ? ""
                    : h.kernel.arch == Arch::Arm64 ? ", even under passthrough (iommu.passthrough=1)"
                                                   : ", even under passthrough (iommu=pt / iommu.passthrough=1)") +
        ", and the group's `type` (" + g.typeText +
        ") names only the default domain it returns to. No "
        "iommud setting changes it; never unbind vfio-pci (it blocks until the VM lets go).";
    f.groups.push_back(g.id);
    f.devices = vfio;
    f.remedies.push_back({"None needed: this is how device assignment isolates a VM", "none"});
    out.push_back(std::move(f));
  }
}

void cmdlineConflict(const HostFacts& h, const HostMode& m, std::vector<Finding>& out) {
  const auto& cl = h.kernel.iommuCmdline;
  std::vector<std::string> problems;
  for (const auto& i : cl.issues) problems.push_back(i.message);
  const auto& tables = h.firmware.tables;
  auto has = [&](std::string_view t) { return std::find(tables.begin(), tables.end(), t) != tables.end(); };
  bool amdHost = m.vendor == Vendor::Amd || (has("IVRS") && !has("DMAR"));
  bool intelHost = m.vendor == Vendor::Intel || (has("DMAR") && !has("IVRS"));
  if (cl.intelGiven && amdHost)
    problems.emplace_back("intel_iommu= is given on an AMD host: the VT-d driver never runs");
  if (cl.amdGiven && intelHost)
    problems.emplace_back("amd_iommu= is given on an Intel host: the AMD driver never runs");
  if (problems.empty()) return;
  Finding f;
  f.id = "cmdline-conflict";
  f.severity = Severity::Warning;
  f.title = "IOMMU options on the command line conflict or are invalid";
  f.summary = "The kernel does not do what these options seem to ask: " + join(problems, "; ") + ".";
  f.remedies.push_back({"Remove the invalid or overridden options so the command line says what the kernel does",
                        "none in itself; check the resulting mode with iommuctl status"});
  out.push_back(std::move(f));
}

// Why no IOMMU is in use, and the way back to one, from what the host shows: the command line
// (x86's iommu=off, intel_iommu=off, amd_iommu=off: docs/kernel.md §1.5), then the firmware's
// tables (DMAR: VT-d, IVRS: AMD-Vi, IORT: an Arm SMMU, VIOT: virtio-iommu).
void iommuOff(const HostFacts& h, const HostMode& m, std::vector<Finding>& out) {
  if (m.present) return;
  const auto& cl = h.kernel.iommuCmdline;
  const auto& tables = h.firmware.tables;
  auto has = [&](std::string_view t) { return std::find(tables.begin(), tables.end(), t) != tables.end(); };
  const std::string cost =
      "translation costs work on every DMA map and unmap (a few percent for most devices, more for drivers "
      "that map many small buffers); iommu=pt, or identity for chosen internal devices in an iommud policy, keeps "
      "that cost off trusted devices while external ones stay protected";
  Finding f;
  f.id = "iommu-off";
  f.severity = Severity::Warning;
  f.title = "No IOMMU is in use: every device can reach all memory";
  std::string why;
  if (cl.iommuOff || cl.intelOn == false || cl.amdOff) {
    std::vector<std::string> given;
    if (cl.iommuOff) given.emplace_back("iommu=off");
    if (cl.intelOn == false) given.emplace_back("intel_iommu=off");
    if (cl.amdOff) given.emplace_back("amd_iommu=off");
    why = "The kernel command line turns it off (" + join(given) + ").";
    for (const auto& g : given) {
      f.remedies.push_back({"Remove " + g + " from the kernel command line", cost});
    }
  } else if (has("DMAR")) {
    why = "The firmware describes a VT-d IOMMU (DMAR table), but this kernel leaves VT-d off by default.";
    f.remedies.push_back({"intel_iommu=on on the kernel command line", cost});
  } else if (has("IVRS") || has("IORT") || has("VIOT")) {
    why = "The firmware describes an IOMMU, but no IOMMU driver took it: the kernel may be built without one.";
    f.remedies.push_back(
        {"Boot a kernel with the IOMMU driver for this hardware (the distribution's kernel has it)", cost});
  } else {
    why = "The firmware describes no IOMMU.";
    f.remedies.push_back(
        {h.kernel.arch == Arch::Arm64
             ? "Use firmware that describes the SMMU (an ACPI IORT table or the device tree's iommus properties)"
             : "Turn the IOMMU on in the firmware setup (Intel: VT-d; AMD: IOMMU or AMD-Vi)",
         cost});
    f.remedies.push_back(
        {"In a virtual machine: give it a virtual IOMMU (QEMU: -device intel-iommu or "
         "virtio-iommu-pci; libvirt: <iommu model='intel'/> or 'virtio')",
         cost + "; in a VM, every map is also a trap to the hypervisor"});
  }
  f.summary = why + " Without an IOMMU, each of the " + std::to_string(h.devices.size()) +
              " PCI functions, and anything plugged into an external (Thunderbolt, USB4) port, can read and "
              "write all of physical memory: a faulty or compromised device or its firmware is not contained.";
  for (const auto& d : h.devices) f.devices.push_back(d.address);
  out.push_back(std::move(f));
}

}  // namespace

std::string_view toString(Severity severity) {
  return nameOf(kSeverityNames, severity);
}

const VersionSet& iotlbSyncMapAffected() {
  static const VersionSet set = VersionSet::parse(">=6.10,<6.12.43 || >=6.13,<6.15.11 || >=6.16,<6.16.2").value();
  return set;
}

std::vector<Finding> findings(const HostFacts& host, const HostMode& mode) {
  std::vector<Finding> out;
  vtdIotlbSyncMap(host, mode, out);
  untrustedBounce(host, mode, out);
  untrustedNoBounceBuffers(host, mode, out);
  cachingMode(host, mode, out);
  virtioBypassesIommu(host, mode, out);
  defaultOn(host, mode, out);
  smmuStrict(host, mode, out);
  vfioTranslated(host, mode, out);
  cmdlineConflict(host, mode, out);
  iommuOff(host, mode, out);
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return a.severity != b.severity ? a.severity > b.severity : a.id < b.id;
  });
  return out;
}

const std::vector<std::string_view>& knownFindingIds() {
  static const std::vector<std::string_view> ids = {
      "vtd-iotlb-sync-map",   "untrusted-bounce", "untrusted-no-bounce-buffers",
      "caching-mode",         "default-on",       "smmu-strict",
      "vfio-translated",      "cmdline-conflict", "iommu-off",
      "virtio-bypasses-iommu"};
  return ids;
}

}  // namespace iommud::core
