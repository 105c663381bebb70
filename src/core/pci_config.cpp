#include "core/pci_config.hpp"

#include "core/little_endian.hpp"

namespace iommud::core {
namespace {

constexpr size_t kStandard = 256;
constexpr size_t kExtended = 4096;
constexpr uint8_t kCapPcie = 0x10;
constexpr uint16_t kExtCapAcs = 0x0d;

// The standard capability list starts at the pointer at 0x34 when status bit 4 says it exists.
// Pointers are dword-aligned and at least 0x40; at most 48 entries fit, which bounds a loop.
std::optional<size_t> findCapability(std::string_view b, uint8_t id) {
  if ((littleEndian(b, 0x06, 2) & 0x10U) == 0) return std::nullopt;
  size_t at = littleEndian(b, 0x34, 1) & 0xfcU;
  for (int n = 0; n < 48 && at >= 0x40 && at + 2 <= b.size() && at < kStandard; ++n) {
    if (littleEndian(b, at, 1) == id) return at;
    at = littleEndian(b, at + 1, 1) & 0xfcU;
  }
  return std::nullopt;
}

// The extended list starts at 0x100: id bits 15:0, version 19:16, next 31:20. At most
// (4096 - 256) / 8 entries fit.
std::optional<size_t> findExtendedCapability(std::string_view b, uint16_t id) {
  size_t at = kStandard;
  for (int n = 0; n < 480 && at >= kStandard && at + 4 <= b.size() && at < kExtended; ++n) {
    uint32_t header = littleEndian(b, at, 4);
    if (header == 0 || header == 0xffffffffU) return std::nullopt;
    if ((header & 0xffffU) == id) return at;
    at = (header >> 20) & 0xffcU;
  }
  return std::nullopt;
}

}  // namespace

std::optional<PciConfig> parsePciConfig(std::string_view bytes) {
  if (bytes.size() < 64) return std::nullopt;
  PciConfig c;
  c.vendorId = static_cast<uint16_t>(littleEndian(bytes, 0, 2));
  c.deviceId = static_cast<uint16_t>(littleEndian(bytes, 2, 2));
  c.multifunction = (littleEndian(bytes, 0x0e, 1) & 0x80U) != 0;
  c.capabilitiesRead = bytes.size() > 64;
  if (c.capabilitiesRead) {
    if (auto pcie = findCapability(bytes, kCapPcie); pcie && *pcie + 4 <= bytes.size()) {
      c.pcieType = static_cast<uint8_t>((littleEndian(bytes, *pcie + 2, 2) >> 4) & 0xfU);
    }
  }
  c.extendedRead = bytes.size() > kStandard;
  if (c.extendedRead) {
    if (auto acs = findExtendedCapability(bytes, kExtCapAcs); acs && *acs + 8 <= bytes.size()) {
      c.acs = Acs{static_cast<uint16_t>(littleEndian(bytes, *acs + 4, 2)),
                  static_cast<uint16_t>(littleEndian(bytes, *acs + 6, 2))};
    }
  }
  return c;
}

std::optional<bool> acsEnabled(const PciConfig& config, uint16_t flags) {
  if (!config.capabilitiesRead) return std::nullopt;
  if (!config.pcieType) return false;  // conventional PCI never isolates
  bool needsCapability = false;
  switch (static_cast<PcieType>(*config.pcieType)) {
    case PcieType::PciToPcieBridge:
    case PcieType::PcieToPciBridge:
    case PcieType::RcEventCollector: return false;
    case PcieType::RootPort:
    case PcieType::Downstream: needsCapability = true; break;
    case PcieType::Endpoint:
    case PcieType::Upstream:
    case PcieType::LegacyEndpoint:
    case PcieType::RcEndpoint: needsCapability = config.multifunction; break;
  }
  if (!needsCapability) return true;
  if (!config.extendedRead) return std::nullopt;
  if (!config.acs) return false;
  // Except for egress control, a feature the capability lacks is taken as hard-wired on.
  uint16_t wanted = flags & (config.acs->capability | kAcsEgressControl);
  return (config.acs->control & wanted) == wanted;
}

std::string_view acsBitName(AcsBit bit) {
  switch (bit) {
    case kAcsSourceValidation: return "SV";
    case kAcsTranslationBlocking: return "TB";
    case kAcsRequestRedirect: return "RR";
    case kAcsCompletionRedirect: return "CR";
    case kAcsUpstreamForwarding: return "UF";
    case kAcsEgressControl: return "EC";
    case kAcsDirectTranslatedP2p: return "DT";
  }
  return "?";
}

}  // namespace iommud::core
