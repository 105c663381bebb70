#include "core/score.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

using namespace iommud;
using namespace iommud::core;
using namespace iommud::testing;

namespace {

std::optional<bool> met(const Score& s, const std::string& id) {
  for (const auto& c : s.criteria) {
    if (c.id == id) return c.met;
  }
  throw std::runtime_error("no criterion " + id);
}

}  // namespace

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
