#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace iommud::core {

/// The flags of the DMAR table (Intel VT-d), as /sys/firmware/acpi/tables/DMAR holds it
/// (root only). docs/kernel.md §11.1.
struct DmarInfo {
  unsigned hostAddressWidth = 0;  // the field + 1, in bits
  uint8_t flags = 0;

  /// INTR_REMAP: the platform supports interrupt remapping.
  [[nodiscard]] bool interruptRemapping() const { return (flags & 0x1U) != 0; }
  /// X2APIC_OPT_OUT: the firmware asks the OS not to enable x2APIC mode.
  [[nodiscard]] bool x2apicOptOut() const { return (flags & 0x2U) != 0; }
  /// DMA_CTRL_PLATFORM_OPT_IN: the firmware protected memory from DMA before the OS started,
  /// and the kernel must keep VT-d on for external-facing ports.
  [[nodiscard]] bool platformOptIn() const { return (flags & 0x4U) != 0; }
};

/// Decodes the DMAR header (signature, length, width, flags); nullopt when the bytes are not a
/// DMAR table or are shorter than its fixed part.
std::optional<DmarInfo> parseDmar(std::string_view bytes);

/// One I/O virtualization hardware definition (IVHD) of the IVRS table.
struct IvhdInfo {
  uint8_t type = 0;       // 0x10, 0x11 or 0x40
  uint16_t deviceId = 0;  // the IOMMU's own PCI requester id (bus << 8 | devfn)
  uint16_t segment = 0;
  uint32_t attributes = 0;      // type 0x10: "IOMMU Feature Reporting"; 0x11/0x40: "IOMMU Attributes"
  std::optional<uint64_t> efr;  // types 0x11/0x40 only: a copy of the EFR register

  /// HATDis (IVHD types 0x11/0x40, attributes bit 0): host address translation is not supported;
  /// the IOMMU remaps interrupts only.
  [[nodiscard]] bool hostTranslationDisabled() const { return type != 0x10 && (attributes & 0x1U) != 0; }
  /// EFR.XTSup (bit 2): x2APIC interrupt remapping.
  [[nodiscard]] bool x2apic() const { return efr && (*efr & 0x4U) != 0; }
};

/// The IVRS table (AMD-Vi). docs/kernel.md §11.2.
struct IvrsInfo {
  uint32_t ivinfo = 0;
  std::vector<IvhdInfo> ivhds;

  /// IVinfo bit 0: the IVHDs of type 0x11/0x40 carry EFR copies.
  [[nodiscard]] bool efrSupported() const { return (ivinfo & 0x1U) != 0; }
  /// IVinfo bit 1 (DMA remap support): the firmware used the IOMMU for DMA protection before the
  /// OS started (the AMD counterpart of DMAR's platform opt-in).
  [[nodiscard]] bool dmaRemapOptIn() const { return (ivinfo & 0x2U) != 0; }
  [[nodiscard]] unsigned physicalAddressSize() const { return (ivinfo >> 8) & 0x7fU; }
  [[nodiscard]] unsigned virtualAddressSize() const { return (ivinfo >> 15) & 0x7fU; }
  /// The IVHD type the kernel uses: the highest of 0x10, 0x11, 0x40 present (its
  /// get_highest_supported_ivhd_type()); 0 when there is none.
  [[nodiscard]] uint8_t kernelIvhdType() const;
  /// HATDis on an IVHD of the type the kernel uses (Linux 6.17: then no ivhdN, no groups).
  [[nodiscard]] bool hostTranslationDisabled() const;
};

/// Decodes IVinfo and the IVHD headers; IVMD entries are skipped. nullopt when the bytes are not
/// an IVRS table; a truncated or malformed subtable ends the walk (what was read stays).
std::optional<IvrsInfo> parseIvrs(std::string_view bytes);

}  // namespace iommud::core
