#pragma once

#include <memory>
#include <string>

#include "support/fake_host.hpp"

namespace iommud::testing {

/// Synthetic hosts for the cases the issue names; each returns a complete root.
/// Intel bare metal, Debian 6.12 kernel: an NVMe with mounted partitions, an internal NIC up with
/// routes, a GPU; lazy DMA-FQ from the config default.
std::unique_ptr<FakeHost> intelBareMetal();
/// A QEMU guest with an emulated VT-d (caching mode): cap d2008c22260286 ecap f00f4a.
std::unique_ptr<FakeHost> intelGuestCachingMode();
/// AMD-Vi with the pre-6.0 `features` format (kernel 5.15, Ubuntu).
std::unique_ptr<FakeHost> amdOldFeatures();
/// AMD-Vi with the EFR2:EFR `features` format (kernel 6.1), iommu=pt.
std::unique_ptr<FakeHost> amdNewFeatures();
/// An Arm SMMUv3 server, strict by default.
std::unique_ptr<FakeHost> armSmmuV3();
/// An Intel host with VT-d off (CONFIG_INTEL_IOMMU_DEFAULT_ON unset, no groups).
std::unique_ptr<FakeHost> noIommu();
/// An AQC100 10 GbE NIC in a Thunderbolt 3 enclosure on an Intel laptop.
std::unique_ptr<FakeHost> thunderboltNic();
/// The same, with the atlantic module in /sys/module: aq_itr writable, aq_itr_rx read-only.
std::unique_ptr<FakeHost> thunderboltNicWithModule();
/// Two NVMe drives behind one bridge in one group, Intel, kernel 6.12.30 (affected).
std::unique_ptr<FakeHost> twoNvmeOneGroup(const char* debianVersion = "6.12.30-1");
/// A GPU bound to vfio-pci under iommu=pt.
std::unique_ptr<FakeHost> vfioGroup();

inline constexpr const char* kIntelBareCap = "d2008c40660462";
inline constexpr const char* kIntelBareEcap = "f050da";
inline constexpr const char* kQemuCap = "d2008c22260286";
inline constexpr const char* kQemuEcap = "f00f4a";

/// A DMAR table's fixed part as the firmware writes it (docs/kernel.md §10.1): the ACPI header
/// ("DMAR", length 48), host address width 39 and the given flags (bit 0 INTR_REMAP, 1
/// X2APIC_OPT_OUT, 2 DMA_CTRL_PLATFORM_OPT_IN).
std::string dmarTable(unsigned char flags);

}  // namespace iommud::testing
