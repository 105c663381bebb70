#include "core/mode.hpp"

#include <algorithm>

namespace iommud::core {
namespace {

using Src = Reason::Source;

bool configIs(const HostFacts& h, const std::string& sym, std::string_view value) {
  auto it = h.kernel.config.find(sym);
  return it != h.kernel.config.end() && it->second == value;
}

bool hasConfig(const HostFacts& h) {
  return !h.kernel.configSource.empty();
}

// Whether the group holds a device the kernel treats as untrusted.
const PciDevice* untrustedMember(const HostFacts& h, const Group& g) {
  for (const auto& a : g.devices) {
    const auto* d = h.device(a);
    if (d != nullptr && d->untrusted()) return d;
  }
  return nullptr;
}

const PciDevice* vfioMember(const HostFacts& h, const Group& g) {
  for (const auto& a : g.devices) {
    const auto* d = h.device(a);
    if (d != nullptr && d->driver == "vfio-pci") return d;
  }
  return nullptr;
}

void explainAbsence(const HostFacts& h, HostMode& m) {
  const auto& cl = h.kernel.iommuCmdline;
  const auto& tables = h.firmware.tables;
  auto has = [&](std::string_view t) { return std::find(tables.begin(), tables.end(), t) != tables.end(); };
  if (cl.iommuOff) m.reasons.push_back({Src::Cmdline, "iommu=off on the command line disables DMA remapping"});
  if (cl.intelOn == false) m.reasons.push_back({Src::Cmdline, cl.intelOnBy + " on the command line turns VT-d off"});
  if (cl.amdOff) m.reasons.push_back({Src::Cmdline, "amd_iommu=off on the command line turns AMD-Vi off"});
  if (has("DMAR") && cl.intelOn != true) {
    if (configIs(h, "CONFIG_INTEL_IOMMU", "n")) {
      m.reasons.push_back({Src::Config, "the kernel is built without CONFIG_INTEL_IOMMU"});
    } else if (hasConfig(h) && intelDefaultOnSymbol(h.kernel).empty()) {
      m.reasons.push_back({Src::Config,
                           "the kernel config leaves VT-d off by default (CONFIG_INTEL_IOMMU_DEFAULT_ON is not set) "
                           "and intel_iommu=on is not on the command line"});
    }
  }
  if (has("IVRS") && !cl.amdOff && !cl.iommuOff) {
    m.reasons.push_back({Src::Firmware,
                         "the firmware has an IVRS table but no AMD-Vi unit is registered: the "
                         "IOMMU may be in HATDis mode (interrupt remapping only) or failed to "
                         "initialise (see dmesg)"});
  }
  if (tables.empty() && h.firmware.acpi) {
    m.reasons.push_back({Src::Firmware,
                         "no DMAR, IVRS, IORT or VIOT table: the firmware describes no IOMMU "
                         "(absent, or disabled in the firmware setup)"});
  } else if (tables.empty() && h.firmware.deviceTree) {
    // Device-tree IOMMUs register when their driver probes the node, often a module on arm64.
    m.reasons.push_back({Src::Firmware,
                         "no ACPI tables: the firmware describes the hardware in a device tree, and no IOMMU "
                         "driver registered a unit from it (no SMMU node, or its driver, arm-smmu-v3 or "
                         "arm-smmu, is not built or not loaded)"});
  } else if (tables.empty()) {
    m.reasons.push_back({Src::Firmware,
                         "neither ACPI tables nor a device tree are readable: what the firmware describes "
                         "is unknown"});
  }
  if (m.reasons.empty()) m.reasons.push_back({Src::Runtime, "no IOMMU is registered and no IOMMU group exists"});
}

// The kernel's boot-time choice of passthrough: config default, platform opt-in, command line.
void derivePassthrough(const HostFacts& h, HostMode& m) {
  const auto& cl = h.kernel.iommuCmdline;
  if (hasConfig(h)) {
    bool pt = configIs(h, "CONFIG_IOMMU_DEFAULT_PASSTHROUGH", "y");
    m.passthrough = pt;
    m.reasons.push_back({Src::Config, pt ? "CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y: passthrough (identity) by default"
                                         : "the kernel config defaults to translated DMA (CONFIG_IOMMU_DEFAULT_"
                                           "PASSTHROUGH is not set)"});
  }
  // VT-d platform opt-in (DMAR flag) turns the IOMMU on even when it is off by default, with
  // identity for every trusted device (intel_iommu_init(), platform_optin_force_iommu()).
  bool intelDefaultOff = hasConfig(h) && intelDefaultOnSymbol(h.kernel).empty();
  if (m.vendor == Vendor::Intel && h.firmware.dmarPlatformOptIn == true && intelDefaultOff && !cl.intelOn) {
    m.passthrough = true;
    m.reasons.push_back({Src::Firmware,
                         "the firmware opts in to DMA protection (DMAR platform opt-in): the "
                         "kernel forced VT-d on, with identity for every trusted device"});
  }
  if (cl.passthrough) {
    m.passthrough = *cl.passthrough;
    m.reasons.push_back(
        {Src::Cmdline, cl.passthroughBy + " on the command line: " +
                           (*cl.passthrough ? "passthrough (identity) by default" : "translated DMA by default")});
  }
  if (m.passthrough == true && cl.memEncrypt == true) {
    m.passthrough = false;
    m.reasons.push_back({Src::Cmdline,
                         "mem_encrypt=on: with memory encryption the kernel refuses default "
                         "passthrough and translates"});
  }
}

// The kernel's boot-time strictness: config default, iommu.strict=, legacy driver options.
void deriveStrict(const HostFacts& h, HostMode& m) {
  const auto& cl = h.kernel.iommuCmdline;
  if (hasConfig(h)) {
    if (configIs(h, "CONFIG_IOMMU_DEFAULT_DMA_STRICT", "y")) {
      m.strict = true;
      m.reasons.push_back({Src::Config, "CONFIG_IOMMU_DEFAULT_DMA_STRICT=y: strict invalidation by default"});
    } else if (configIs(h, "CONFIG_IOMMU_DEFAULT_DMA_LAZY", "y")) {
      m.strict = false;
      m.reasons.push_back({Src::Config,
                           "CONFIG_IOMMU_DEFAULT_DMA_LAZY=y: lazy invalidation (flush queue) by "
                           "default"});
    } else if (!h.kernel.config.contains("CONFIG_IOMMU_DEFAULT_DMA_STRICT")) {
      // Before 5.15 strictness was each driver's own default.
      bool arm = m.vendor == Vendor::ArmSmmu || m.vendor == Vendor::ArmSmmuV3;
      m.strict = arm;
      m.reasons.push_back({Src::Config, std::string("no CONFIG_IOMMU_DEFAULT_DMA_* (kernel before 5.15): the ") +
                                            std::string(displayName(m.vendor)) + " driver defaults to " +
                                            (arm ? "strict" : "lazy") + " invalidation"});
    }
  }
  if (cl.strict) {
    m.strict = *cl.strict;
    m.reasons.push_back(
        {Src::Cmdline, cl.strictBy + " on the command line: " + (*cl.strict ? "strict" : "lazy") + " invalidation"});
  }
  if (cl.legacyStrict) {
    m.strict = true;
    m.reasons.push_back({Src::Cmdline, cl.legacyStrictBy + " on the command line forces strict invalidation"});
  }
}

// What trusted devices get once drivers have applied their constraints.
void deriveDefaultType(const HostFacts& h, HostMode& m) {
  const auto& cl = h.kernel.iommuCmdline;
  bool strict = m.strict.value_or(false);
  for (const auto& u : h.units) {
    if (u.intel && u.intel->cachingMode()) {
      bool scalable =
          u.intel->scalableMode() &&
          (cl.intelScalableMode == true ||
           (configIs(h, "CONFIG_INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON", "y") && cl.intelScalableMode != false));
      if (!(scalable && u.intel->firstLevelTranslation()) && !strict) {
        strict = true;
        m.reasons.push_back({Src::Driver, u.name + " has Caching Mode (an emulated IOMMU): the VT-d driver forces "
                                                   "strict invalidation (\"IOMMU batching disallowed due to "
                                                   "virtualization\")"});
      }
    }
    if (u.amd && u.amd->npCache() && !strict) {
      strict = true;
      m.reasons.push_back({Src::Driver, u.name + " caches not-present entries (NpCache, a virtual IOMMU): the AMD "
                                                 "driver forces strict invalidation"});
    }
  }
  if (!m.passthrough) return;
  if (*m.passthrough) {
    m.defaultType = DomainType::Identity;
    for (const auto& u : h.units) {
      if (u.intel && !u.intel->passThrough()) {
        m.defaultType = DomainType::Dma;
        m.reasons.push_back({Src::Driver, u.name + " cannot pass through (ecap.PT=0): identity is impossible, "
                                                   "devices stay translated"});
        break;
      }
    }
    return;
  }
  if (!m.strict && !strict) return;  // strictness unknown
  auto fq = h.kernel.upstream.version && *h.kernel.upstream.version < KernelVersion{5, 15, 0}
                ? DomainType::Dma  // lazy existed before 5.15 but `type` could not tell it apart
                : DomainType::DmaFq;
  m.defaultType = strict ? DomainType::Dma : fq;
}

// Without a readable kernel config, the group types are the only evidence.
void inferFromGroups(const HostFacts& h, HostMode& m) {
  std::map<DomainType, int> counts;
  for (const auto& g : h.groups) {
    if (!g.type || untrustedMember(h, g) != nullptr) continue;
    ++counts[*g.type];
  }
  if (counts.empty()) return;
  auto best =
      std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  DomainType t = best->first;
  if (!m.passthrough) m.passthrough = t == DomainType::Identity;
  if (!m.strict && t == DomainType::DmaFq) m.strict = false;
  if (!m.defaultType) m.defaultType = t;
  m.reasons.push_back({Src::Inferred, "the kernel config is not readable: the default is inferred from " +
                                          std::to_string(best->second) + " group(s) that read " +
                                          std::string(toString(t))});
}

void explainGroups(const HostFacts& h, HostMode& m) {
  for (const auto& g : h.groups) {
    auto& notes = m.groupNotes[g.id];
    if (const auto* d = vfioMember(h, g)) {
      notes.push_back(d->address +
                      " is bound to vfio-pci: the device works through a VFIO/iommufd domain, "
                      "translated whatever `type` shows (it names the default domain only)");
    }
    if (!g.type) {
      notes.push_back("`type` reads \"" + g.typeText + "\": not a domain type this version knows");
      continue;
    }
    if (const auto* d = untrustedMember(h, g); d != nullptr && *g.type == DomainType::Dma) {
      notes.push_back(d->address +
                      " is untrusted (external-facing port): the kernel forces strict DMA and "
                      "bounces sub-page mappings");
      continue;
    }
    if (m.defaultType && *g.type != *m.defaultType && *g.type != DomainType::Unknown) {
      notes.push_back("reads " + std::string(toString(*g.type)) + ", not the host default " +
                      std::string(toString(*m.defaultType)) + ": changed at runtime or by a driver quirk");
    }
    if (notes.empty()) m.groupNotes.erase(g.id);
  }
}

}  // namespace

std::string_view toString(Reason::Source source) {
  return nameOf(kReasonSourceNames, source);
}

std::string HostMode::modeName() const {
  if (!present) return "off";
  return defaultType ? std::string(toString(*defaultType)) : "unknown";
}

HostMode deriveMode(const HostFacts& host) {
  HostMode m;
  m.present = host.iommuPresent();
  m.vendor = host.vendor();
  if (!m.present) {
    explainAbsence(host, m);
    return m;
  }
  derivePassthrough(host, m);
  deriveStrict(host, m);
  deriveDefaultType(host, m);
  if (!m.defaultType) inferFromGroups(host, m);
  explainGroups(host, m);
  return m;
}

}  // namespace iommud::core
