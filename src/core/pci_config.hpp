#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace iommud::core {

/// The bits of the PCIe ACS capability and control registers (include/uapi/linux/pci_regs.h,
/// docs/kernel.md §11.3).
enum AcsBit : uint16_t {
  kAcsSourceValidation = 0x0001,     // SV
  kAcsTranslationBlocking = 0x0002,  // TB
  kAcsRequestRedirect = 0x0004,      // RR
  kAcsCompletionRedirect = 0x0008,   // CR
  kAcsUpstreamForwarding = 0x0010,   // UF
  kAcsEgressControl = 0x0020,        // EC
  kAcsDirectTranslatedP2p = 0x0040,  // DT
};

/// What the IOMMU core asks of every bridge and function on a device's path before it gives
/// the device a group of its own: SV, RR, CR, UF (REQ_ACS_FLAGS in drivers/iommu/iommu.c).
inline constexpr uint16_t kAcsIsolationFlags =
    kAcsSourceValidation | kAcsRequestRedirect | kAcsCompletionRedirect | kAcsUpstreamForwarding;

/// The PCIe port type (PCIe capability register bits 7:4, PCI_EXP_TYPE_*).
enum class PcieType : uint8_t {
  Endpoint = 0x0,
  LegacyEndpoint = 0x1,
  RootPort = 0x4,
  Upstream = 0x5,
  Downstream = 0x6,
  PcieToPciBridge = 0x7,
  PciToPcieBridge = 0x8,
  RcEndpoint = 0x9,
  RcEventCollector = 0xa,
};

/// An ACS extended capability: what the function implements and what is turned on.
struct Acs {
  uint16_t capability = 0;
  uint16_t control = 0;
};

/// What the config space of one PCI function says about isolation.
struct PciConfig {
  uint16_t vendorId = 0;
  uint16_t deviceId = 0;
  bool multifunction = false;       // header type bit 7
  std::optional<uint8_t> pcieType;  // nullopt: conventional PCI (no PCIe capability)
  std::optional<Acs> acs;           // nullopt: no ACS capability (or the extended space unread)
  bool capabilitiesRead = false;    // more than the 64 bytes an unprivileged read returns
  bool extendedRead = false;        // the bytes reach past 256: the extended space was readable
};

/// Decodes a function's `config` file. Without root the kernel returns only the first 64 bytes
/// (no capabilities at all); a short read leaves what it cannot tell unknown. nullopt when the
/// bytes are shorter than the standard header.
std::optional<PciConfig> parsePciConfig(std::string_view bytes);

/// Whether the kernel sees these ACS flags as enabled on the function, as pci_acs_enabled()
/// decides without its device-specific quirks (drivers/pci/pci.c, docs/kernel.md §11.3):
/// conventional PCI and PCIe-to-PCI bridges never; root and downstream ports by their ACS
/// capability; endpoints and upstream ports by theirs only when multi-function, else yes.
/// Flags the capability does not implement count as enabled, except egress control.
/// nullopt when the needed part of the config space was not readable.
std::optional<bool> acsEnabled(const PciConfig& config, uint16_t flags);

/// The spec's short name of an ACS bit: "SV", "RR", ...
std::string_view acsBitName(AcsBit bit);

}  // namespace iommud::core
