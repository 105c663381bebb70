#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iommud::core {

/// Parses a hex register as sysfs prints it ("d2008c22260286", optional 0x, trailing newline).
std::optional<uint64_t> parseHex64(std::string_view text);

/// Decoded Intel VT-d capability (CAP_REG) and extended capability (ECAP_REG) registers.
struct IntelCaps {
  uint64_t cap = 0;
  uint64_t ecap = 0;

  // CAP_REG
  [[nodiscard]] unsigned numDomainsLog2() const { return 4 + 2 * static_cast<unsigned>(cap & 0x7); }
  [[nodiscard]] bool rwbf() const { return bit(cap, 4); }
  [[nodiscard]] bool cachingMode() const { return bit(cap, 7); }
  [[nodiscard]] unsigned sagaw() const { return static_cast<unsigned>((cap >> 8) & 0x1f); }
  [[nodiscard]] unsigned mgaw() const { return static_cast<unsigned>((cap >> 16) & 0x3f) + 1; }
  [[nodiscard]] bool superPage2M() const { return bit(cap, 34); }
  [[nodiscard]] bool superPage1G() const { return bit(cap, 35); }
  [[nodiscard]] bool pageSelectiveInvalidation() const { return bit(cap, 39); }
  [[nodiscard]] bool firstLevel1G() const { return bit(cap, 56); }
  [[nodiscard]] bool postedInterrupts() const { return bit(cap, 59); }

  // ECAP_REG
  [[nodiscard]] bool coherent() const { return bit(ecap, 0); }
  [[nodiscard]] bool queuedInvalidation() const { return bit(ecap, 1); }
  [[nodiscard]] bool deviceTlb() const { return bit(ecap, 2); }
  [[nodiscard]] bool interruptRemapping() const { return bit(ecap, 3); }
  [[nodiscard]] bool extendedInterruptMode() const { return bit(ecap, 4); }  // EIM: x2APIC
  [[nodiscard]] bool passThrough() const { return bit(ecap, 6); }
  [[nodiscard]] bool snoopControl() const { return bit(ecap, 7); }
  [[nodiscard]] bool pasid() const { return bit(ecap, 40); }
  [[nodiscard]] bool scalableMode() const { return bit(ecap, 43); }
  [[nodiscard]] bool secondLevelTranslation() const { return bit(ecap, 46); }
  [[nodiscard]] bool firstLevelTranslation() const { return bit(ecap, 47); }

  /// Super-page sizes the second-level tables support, e.g. {"2M", "1G"}.
  [[nodiscard]] std::vector<std::string> superPageSizes() const;

  static bool bit(uint64_t reg, unsigned n) { return ((reg >> n) & 1U) != 0; }
};

/// Decoded AMD-Vi capability header and extended feature registers (EFR, and EFR2 since 6.0).
struct AmdCaps {
  uint32_t cap = 0;
  uint64_t efr = 0;
  std::optional<uint64_t> efr2;  // only in the "EFR2:EFR" format of kernels >= 6.0

  [[nodiscard]] bool iotlb() const { return ((cap >> 24) & 1U) != 0; }
  [[nodiscard]] bool npCache() const { return ((cap >> 26) & 1U) != 0; }
  [[nodiscard]] bool efrSupported() const { return ((cap >> 27) & 1U) != 0; }
  [[nodiscard]] bool guestTranslation() const { return IntelCaps::bit(efr, 4); }
  [[nodiscard]] bool ppr() const { return IntelCaps::bit(efr, 1); }
  [[nodiscard]] unsigned hostAddressTranslationLevels() const { return 4 + static_cast<unsigned>((efr >> 10) & 0x3); }
};

/// Parses the AMD `features` attribute: "EFR" (before 6.0) or "EFR2:EFR" (6.0 and later).
struct AmdFeatures {
  uint64_t efr = 0;
  std::optional<uint64_t> efr2;
};
std::optional<AmdFeatures> parseAmdFeatures(std::string_view text);

/// Whether the VT-d driver forces write-buffer flushing for this PCI device although RWBF reads
/// 0: the chipsets of its quirk_iommu_rwbf() list (Intel Mobile 4 Series and its desktop
/// versions, docs/kernel.md §3). The kernel skips the quirk for an untrusted device.
bool needsRwbfQuirk(uint16_t vendorId, uint16_t deviceId);

}  // namespace iommud::core
