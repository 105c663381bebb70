#include "core/measured_effect.hpp"

#include <gtest/gtest.h>

namespace measured_effect_test {

using namespace iommud::core;

DmaRow drive(const std::string& address, const std::string& name, double mapsPerSecond, bool translated) {
  DmaRow r;
  r.dma.device = address;
  r.name = name;
  r.driver = "nvme";
  r.group = 14;
  r.domain = translated ? DomainType::Dma : DomainType::Identity;
  r.translated = translated;
  r.dma.mapsPerSecond = mapsPerSecond;
  r.dma.meanMapBytes = 4096;
  return r;
}

DmaWindow window(double seconds, std::vector<DmaRow> rows, bool attributed = true) {
  DmaWindow w;
  w.seconds = seconds;
  w.mapsAttributed = attributed;
  w.rows = std::move(rows);
  return w;
}

TEST(MeasuredEffect, SaysWhatTheChangeDidToEachChangedDeviceInTheOrderAsked) {
  auto before = window(5, {drive("0000:01:00.0", "nvme0", 8123, true), drive("0000:02:00.0", "nvme1", 10, true),
                           drive("0000:03:00.0", "nvme2", 99, true)});
  auto after = window(5.02, {drive("0000:01:00.0", "nvme0", 8090, false), drive("0000:02:00.0", "nvme1", 0, false),
                             drive("0000:03:00.0", "nvme2", 99, true)});
  auto effects = measuredEffects(before, after, {"0000:02:00.0", "0000:01:00.0", "0000:02:00.0"});
  ASSERT_EQ(effects.size(), 2U);  // each device once; nvme2 was not changed
  EXPECT_EQ(effects[0].name, "nvme1");
  EXPECT_EQ(effects[1].device, "0000:01:00.0");
  ASSERT_TRUE(effects[1].before && effects[1].after);
  EXPECT_EQ(effects[1].before->translated, true);
  EXPECT_EQ(effects[1].after->translated, false);
  EXPECT_EQ(describe(effects[1]),
            "nvme0: 8123 -> 8090 maps/s, mean 4096 -> 4096 bytes, translated -> not translated, 0 -> 0 bounces/s "
            "(5.0 s before, 5.0 s after)");
}

TEST(MeasuredEffect, ADeviceThatCameOrWentHasOneSideOnly) {
  auto gone = drive("0000:01:00.0", "nvme0", 0, true);
  gone.present = false;
  auto effects = measuredEffects(window(5, {drive("0000:01:00.0", "nvme0", 100, true)}), window(5, {gone}),
                                 {"0000:01:00.0", "0000:09:00.0"});
  ASSERT_EQ(effects.size(), 1U);  // 0000:09:00.0 is in neither window
  EXPECT_TRUE(effects[0].before.has_value());
  EXPECT_FALSE(effects[0].after.has_value());
  EXPECT_NE(describe(effects[0]).find("100 -> - maps/s"), std::string::npos) << describe(effects[0]);
  EXPECT_NE(describe(effects[0]).find("translated -> absent"), std::string::npos) << describe(effects[0]);
}

TEST(MeasuredEffect, AKernelWithoutPerDeviceMapsSaysSoAndStillGivesBouncesAndFaults) {
  auto nic = drive("0000:05:00.0", "enp5s0", 0, true);
  nic.dma.bouncesPerSecond = 250;
  nic.dma.delta.faults = 2;
  auto effects = measuredEffects(window(5, {nic}, false), window(5, {drive("0000:05:00.0", "enp5s0", 0, true)}, false),
                                 {"0000:05:00.0"});
  ASSERT_EQ(effects.size(), 1U);
  EXPECT_FALSE(effects[0].mapsAttributed);
  std::string text = describe(effects[0]);
  EXPECT_NE(text.find("maps not attributed to devices by this kernel"), std::string::npos) << text;
  EXPECT_EQ(text.find("maps/s"), std::string::npos) << text;
  EXPECT_NE(text.find("250 -> 0 bounces/s, IOMMU faults 2 -> 0"), std::string::npos) << text;
}

TEST(MeasuredEffect, TheHostLineGivesWhatTheIommuMappedInAll) {
  auto before = window(5, {});
  before.hostMapsPerSecond = 3175.4;
  auto after = window(5, {});
  after.hostMapsPerSecond = 2;
  EXPECT_EQ(describeHost(before, after), "host: 3175 -> 2 IOMMU page maps/s");
}

}  // namespace measured_effect_test
