#include "core/score.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace score_test {

using namespace iommud;
using namespace iommud::core;
using namespace iommud::testing;

std::optional<bool> met(const Score& s, const std::string& id) {
  for (const auto& c : s.criteria) {
    if (c.id == id) return c.met;
  }
  throw std::runtime_error("no criterion " + id);
}

TEST(Score, PassthroughOnTheCommandLineIsLevelZeroHoweverEnabledTheIommuIs) {
  auto h = twoNvmeOneGroup();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro intel_iommu=on iommu=pt");
  h->write("/sys/kernel/iommu_groups/0/type", "identity\n");
  h->write("/sys/kernel/iommu_groups/20/type", "identity\n");
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(s.level, 0);
  EXPECT_EQ(met(s, "no-device-reaches-all-memory"), false);
}

TEST(Score, TheLazyDefaultStopsAtLevelTwo) {
  auto h = twoNvmeOneGroup();
  h->firmwareTable("DMAR", dmarTable(0x01));  // as root reads it
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(met(s, "no-device-reaches-all-memory"), true);
  EXPECT_EQ(met(s, "interrupt-remapping"), true);  // DMAR INTR_REMAP, ecap.IR
  EXPECT_EQ(met(s, "strict-invalidation"), false);
  EXPECT_EQ(s.level, 2);
}

TEST(Score, StrictWithPreBootProtectionIsLevelThree) {
  auto h = twoNvmeOneGroup();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro iommu.strict=1");
  h->firmwareTable("DMAR", dmarTable(0x05));
  h->write("/sys/kernel/iommu_groups/0/type", "DMA\n");
  h->write("/sys/kernel/iommu_groups/20/type", "DMA\n");
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(s.level, 3);
  h->firmwareTable("DMAR", dmarTable(0x01));
  EXPECT_EQ(app::scoreOf(statusOf(*h)).level, 2);
}

TEST(Score, AnUnknownCriterionIsNotMet) {
  // AMD's sysfs does not tell whether interrupts are remapped: unknown, so not level 2.
  auto s = app::scoreOf(statusOf(*amdNewFeatures()));
  EXPECT_EQ(met(s, "interrupt-remapping"), std::nullopt);
  EXPECT_LE(s.level, 1);
}

TEST(Score, InterruptRemappingOffIsLevelOne) {
  auto h = twoNvmeOneGroup();
  h->firmwareTable("DMAR", dmarTable(0x01));
  h->intelUnit("dmar0", kIntelBareCap, "f050d2");  // ecap.IR clear
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(met(s, "interrupt-remapping"), false);
  EXPECT_EQ(s.level, 1);
}

TEST(Score, AnUntrustedDeviceInLazyModeIsNotContained) {
  auto h = thunderboltNic();
  h->write("/sys/kernel/iommu_groups/17/type", "DMA-FQ\n");
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(met(s, "untrusted-strict-and-bounced"), false);
  EXPECT_EQ(met(s, "bounce-pool-active"), true);
  EXPECT_EQ(s.level, 1);
}

TEST(Score, NoIommuIsLevelZero) {
  EXPECT_EQ(app::scoreOf(statusOf(*noIommu())).level, 0);
}

TEST(Score, Arm64IsJudgedByMsiIsolationNotByInterruptRemapping) {
  auto h = armSmmuV3();
  h->write("/sys/kernel/irq/10/chip_name", "ITS-MSI\n");
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(met(s, "msi-isolation"), true);
  EXPECT_TRUE(std::none_of(s.criteria.begin(), s.criteria.end(),
                           [](const Criterion& c) { return c.id == "interrupt-remapping"; }));
  EXPECT_EQ(s.level, 2);  // strict; pre-boot DMA protection is not knowable on arm64
  h->write("/sys/kernel/irq/10/chip_name", "GICv2m-PCI-MSI\n");
  s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(met(s, "msi-isolation"), false);
  EXPECT_EQ(s.level, 1);
}

TEST(Score, AnArm64HostBridgeInNoGroupDoesNotReachAllMemory) {
  // As Debian's arm64 kernels leave QEMU's host bridge: no driver, so no group.
  auto h = std::make_unique<FakeHost>("6.12.48+deb13-arm64");
  h->machine("aarch64");
  h->config({"CONFIG_ARM_SMMU_V3=y", "CONFIG_IOMMU_DEFAULT_DMA_STRICT=y"});
  h->otherUnit("smmu3.0x0000000009050000");
  h->pci({.address = "0000:00:00.0", .vendor = 0x1b36, .device = 0x0008, .classCode = 0x060000});
  h->pci(
      {.address = "0000:00:01.0", .vendor = 0x1af4, .device = 0x1041, .classCode = 0x020000, .driver = "virtio-pci"});
  h->group(0, "DMA\n", {"0000:00:01.0"});
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(met(s, "no-device-reaches-all-memory"), true);
  EXPECT_EQ(met(s, "every-device-judged"), true);
  EXPECT_EQ(s.level, 1);  // no MSI chip read: msi-isolation unknown
}

TEST(Score, AVirtioDeviceThatBypassesTheIommuIsLevelZero) {
  auto h = virtioGuest();
  auto s = app::scoreOf(statusOf(*h));
  EXPECT_EQ(s.level, 0);
  EXPECT_EQ(met(s, "no-device-reaches-all-memory"), false);
  h->write("/sys/devices/pci0000:00/0000:00:05.0/virtio1/features", std::string(32, '0') + "11" + std::string(30, '0'));
  EXPECT_GE(app::scoreOf(statusOf(*h)).level, 1);
}
}  // namespace score_test
