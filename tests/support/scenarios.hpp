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
/// The tests/vm untrusted guest (Debian 6.12.117, VT-d CM=0, 1 GiB): an e1000e at 06:00.0 behind
/// the root port 00:10.0 that an SSDT marks external-facing, removable, its group strict DMA while
/// the others are DMA-FQ; a trusted e1000e at 04:00.0; debugfs's swiotlb directory empty (no pool).
std::unique_ptr<FakeHost> externalPortGuest();
/// A QEMU q35 guest on 6.12 with a virtual VT-d and two virtio-blk functions in groups of their
/// own: 00:04.0 (virtio0) with iommu_platform=on, 00:05.0 (virtio1) without; no confidential
/// computing in /proc/cpuinfo (tests/vm `virtio`).
std::unique_ptr<FakeHost> virtioGuest();
/// Two NVMe drives behind one bridge in one group, Intel, kernel 6.12.30 (affected).
/// A workstation on Debian 12's 6.12.38 (VT-d, lazy by default, before the 6.12.43 fix): the
/// integrated GPU, an onboard NIC carrying the default route, the root NVMe, two scratch NVMe
/// drives behind one PCIe switch (one IOMMU group: the VT-d regression), and a 10 GbE Thunderbolt
/// NIC (AQC100, atlantic) in an enclosure: untrusted, strict, bouncing. The README's captured
/// host (docs/examples/workstation.tar is its snapshot).
std::unique_ptr<FakeHost> workstation();
std::unique_ptr<FakeHost> twoNvmeOneGroup(const char* debianVersion = "6.12.30-1");
/// twoNvmeOneGroup with a second pair of drives in a group of its own: two instances of the
/// vtd-iotlb-sync-map finding, as a host with two NVMe groups under the regression has.
std::unique_ptr<FakeHost> twoNvmePairs();
/// A GPU bound to vfio-pci under iommu=pt.
std::unique_ptr<FakeHost> vfioGroup();

inline constexpr const char* kIntelBareCap = "d2008c40660462";
inline constexpr const char* kIntelBareEcap = "f050da";
inline constexpr const char* kQemuCap = "d2008c22260286";
inline constexpr const char* kQemuEcap = "f00f4a";
inline constexpr const char* kQemuCm0Cap = "d2008c22260206";  // caching-mode=off
inline constexpr const char* kQemuCm0Ecap = "f42";

/// A DMAR table's fixed part as the firmware writes it (docs/kernel.md §11.1): the ACPI header
/// ("DMAR", length 48), host address width 39 and the given flags (bit 0 INTR_REMAP, 1
/// X2APIC_OPT_OUT, 2 DMA_CTRL_PLATFORM_OPT_IN).
std::string dmarTable(unsigned char flags);

}  // namespace iommud::testing
