#include "core/mode.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace mode_test {

using namespace iommud;
using namespace iommud::core;
using namespace iommud::testing;
using Src = Reason::Source;

TEST(Mode, LazyFromTheConfigDefaultOnBareMetal) {
  auto s = statusOf(*intelBareMetal());
  EXPECT_TRUE(s.mode.present);
  EXPECT_EQ(s.mode.vendor, Vendor::Intel);
  EXPECT_EQ(s.mode.passthrough, false);
  EXPECT_EQ(s.mode.strict, false);
  EXPECT_EQ(s.mode.defaultType, DomainType::DmaFq);
  EXPECT_EQ(s.mode.modeName(), "DMA-FQ");
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Config, "CONFIG_IOMMU_DEFAULT_DMA_LAZY=y"));
  EXPECT_TRUE(s.mode.groupNotes.empty());
}

TEST(Mode, CachingModeForcesStrictAfterTheBootLogSaidLazy) {
  auto s = statusOf(*intelGuestCachingMode());
  // The boot log's "TLB invalidation policy" line is printed before the VT-d driver runs.
  EXPECT_EQ(s.mode.strict, false);
  EXPECT_EQ(s.mode.defaultType, DomainType::Dma);
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Driver, "dmar0 has Caching Mode"));
  EXPECT_TRUE(s.mode.groupNotes.empty());
}

TEST(Mode, CommandLineOverridesTheConfig) {
  auto h = intelBareMetal();
  h->cmdline("root=/dev/nvme0n1p2 iommu.strict=1");
  auto s = statusOf(*h);
  EXPECT_EQ(s.mode.strict, true);
  EXPECT_EQ(s.mode.defaultType, DomainType::Dma);
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Cmdline, "iommu.strict=1 on the command line: strict"));
  // The groups still read DMA-FQ: that difference is explained per group.
  ASSERT_TRUE(s.mode.groupNotes.contains(12));
  EXPECT_NE(s.mode.groupNotes.at(12)[0].find("not the host default DMA"), std::string::npos);

  h->cmdline("root=/dev/nvme0n1p2 iommu=pt");
  auto pt = statusOf(*h);
  EXPECT_EQ(pt.mode.passthrough, true);
  EXPECT_EQ(pt.mode.defaultType, DomainType::Identity);
}

TEST(Mode, PassthroughIsImpossibleWithoutEcapPt) {
  auto h = intelBareMetal();
  h->intelUnit("dmar0", kIntelBareCap, "f0509a");  // bit 6 (PT) cleared
  h->cmdline("iommu=pt");
  auto s = statusOf(*h);
  EXPECT_EQ(s.mode.passthrough, true);
  EXPECT_EQ(s.mode.defaultType, DomainType::Dma);
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Driver, "cannot pass through"));
}

TEST(Mode, UntrustedGroupsAreExplained) {
  auto s = statusOf(*thunderboltNic());
  ASSERT_TRUE(s.mode.groupNotes.contains(17));
  EXPECT_NE(s.mode.groupNotes.at(17)[0].find("0000:05:00.0 is untrusted"), std::string::npos);
}

TEST(Mode, OffExplainsWhyWithTheConfigAndFirmware) {
  auto s = statusOf(*noIommu());
  EXPECT_FALSE(s.mode.present);
  EXPECT_EQ(s.mode.modeName(), "off");
  EXPECT_FALSE(s.mode.passthrough);
  EXPECT_FALSE(s.mode.strict);
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Config, "leaves VT-d off by default"));

  auto h = noIommu();
  h->cmdline("intel_iommu=off");
  EXPECT_TRUE(hasReasonContaining(statusOf(*h).mode, Src::Cmdline, "intel_iommu=off on the command line"));
}

TEST(Mode, ArmIsStrictByDefault) {
  auto s = statusOf(*armSmmuV3());
  EXPECT_EQ(s.mode.vendor, Vendor::ArmSmmuV3);
  EXPECT_EQ(s.mode.strict, true);
  EXPECT_EQ(s.mode.defaultType, DomainType::Dma);
}

// An arm64 host booted with a device tree has no /sys/firmware/acpi at all: that is not firmware
// that "describes no IOMMU" (its SMMU appears when the driver probes the node), and a host without
// either is unknown, not IOMMU-less.
TEST(Mode, ADeviceTreeHostWithoutAnSmmuSaysWhyNotThatNoAcpiTableDescribesOne) {
  auto h = std::make_unique<FakeHost>("6.1.0-56-arm64");
  h->config({"CONFIG_ARM_SMMU_V3=m", "CONFIG_IOMMU_DEFAULT_DMA_STRICT=y"});
  h->pci({.address = "0000:00:01.0", .vendor = 0x8086, .device = 0x10d3, .classCode = 0x020000, .driver = "e1000e"});
  h->deviceTree();
  auto s = statusOf(*h);
  EXPECT_FALSE(s.mode.present);
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Firmware, "device tree, and no IOMMU driver registered a unit"));
  EXPECT_FALSE(hasReasonContaining(s.mode, Src::Firmware, "no DMAR, IVRS, IORT or VIOT table"));

  std::filesystem::remove_all(h->root() / "sys/firmware/devicetree");
  auto unknown = statusOf(*h);
  EXPECT_TRUE(hasReasonContaining(unknown.mode, Src::Firmware, "neither ACPI tables nor a device tree"));
  EXPECT_FALSE(hasReasonContaining(unknown.mode, Src::Firmware, "no DMAR, IVRS, IORT or VIOT table"));

  FakeHost acpi("6.1.0-56-amd64");  // x86 with ACPI and no IOMMU table: as before
  acpi.config({"CONFIG_INTEL_IOMMU=y", "CONFIG_INTEL_IOMMU_DEFAULT_ON=y"});
  EXPECT_TRUE(hasReasonContaining(statusOf(acpi).mode, Src::Firmware, "no DMAR, IVRS, IORT or VIOT table"));
}

TEST(Mode, PassthroughOnAmdFromTheCommandLine) {
  auto s = statusOf(*amdNewFeatures());
  EXPECT_EQ(s.mode.passthrough, true);
  EXPECT_EQ(s.mode.defaultType, DomainType::Identity);
  EXPECT_TRUE(s.mode.groupNotes.empty());
}

TEST(Mode, InfersTheDefaultFromGroupsWithoutAConfig) {
  auto h = thunderboltNic();
  std::filesystem::remove(h->root() / "boot/config-6.12.38+deb12-amd64");
  auto s = statusOf(*h);
  // The untrusted groups (DMA) do not count; the others read DMA-FQ.
  EXPECT_EQ(s.mode.defaultType, DomainType::DmaFq);
  EXPECT_EQ(s.mode.passthrough, false);
  EXPECT_EQ(s.mode.strict, false);
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Inferred, "inferred from 3 group(s) that read DMA-FQ"));
}

TEST(Mode, PlatformOptInTurnsVtdOnWithIdentity) {
  auto h = noIommu();
  h->firmwareTable("DMAR", dmarTable(0x04));
  h->intelUnit("dmar0", kIntelBareCap, kIntelBareEcap);
  h->group(0, "identity\n", {"0000:00:1f.6"});
  auto s = statusOf(*h);
  EXPECT_EQ(s.mode.passthrough, true);
  EXPECT_EQ(s.mode.defaultType, DomainType::Identity);
  EXPECT_TRUE(hasReasonContaining(s.mode, Src::Firmware, "platform opt-in"));
}

// docs/kernel.md §1.5: the kernel's machine name, else the IOMMU hardware of one architecture.
TEST(Arch, TheMachineNameElseTheIommuHardwareAndTables) {
  HostFacts h;
  EXPECT_EQ(deriveArch(h), Arch::Unknown);
  h.units.push_back({.name = "smmu3.0x0000000009050000", .vendor = Vendor::ArmSmmuV3});
  EXPECT_EQ(deriveArch(h), Arch::Arm64);
  h.firmware.tables = {"DMAR"};
  EXPECT_EQ(deriveArch(h), Arch::Unknown);  // evidence both ways: no guess
  h.units.clear();
  EXPECT_EQ(deriveArch(h), Arch::X86);
  h.firmware.tables = {"IORT"};
  EXPECT_EQ(deriveArch(h), Arch::Arm64);
  h.kernel.machine = "x86_64";  // the kernel's own word wins
  EXPECT_EQ(deriveArch(h), Arch::X86);
  h.kernel.machine = "riscv64";
  EXPECT_EQ(deriveArch(h), Arch::Other);
}

}  // namespace mode_test
