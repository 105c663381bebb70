#include "app/report/top.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace top_test {

using namespace iommud;
using namespace iommud::core;

DmaRow row(const std::string& address, uint64_t maps, bool present = true) {
  DmaRow r;
  r.dma.device = address;
  r.dma.delta.maps = maps;
  r.dma.delta.unmaps = maps;
  r.dma.delta.mappedBytes = maps * 4096;
  r.dma.mapsPerSecond = static_cast<double>(maps);
  if (maps > 0) r.dma.meanMapBytes = 4096;
  r.name = address;
  r.present = present;
  return r;
}

app::TopView view(bool attributed) {
  app::TopView v;
  v.kernel = attributed ? "6.12.117+deb12-amd64" : "6.1.0-56-amd64";
  v.interval.seconds = 1;
  v.interval.mapsAttributed = attributed;
  v.interval.hostMapsPerSecond = 500;
  v.rows = {row("0000:01:00.0", 500), row("0000:03:01.0", 0), row("0000:09:00.0", 7, false)};
  if (!attributed) v.absent = {DmaEvent::MapPage, DmaEvent::UnmapPage, DmaEvent::MapSg, DmaEvent::UnmapSg};
  return v;
}

TEST(TopJson, MapsAreNullNotZeroWhenTheKernelCannotAttributeThem) {
  auto doc = nlohmann::json::parse(app::topJson(view(false)));
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_FALSE(doc["maps_attributed"].get<bool>());
  EXPECT_NE(doc["note"].get<std::string>().find("cannot be attributed"), std::string::npos);
  for (const auto& d : doc["devices"]) {
    EXPECT_TRUE(d["maps"].is_null());
    EXPECT_TRUE(d["mean_map_bytes"].is_null());
    EXPECT_EQ(d["bounces"], 0);
  }
  EXPECT_EQ(doc["host"]["iommu_maps_per_second"], 500);
}

TEST(TopJson, CountsAndRatesWhenAttributed) {
  auto doc = nlohmann::json::parse(app::topJson(view(true)));
  EXPECT_TRUE(doc["note"].is_null());
  EXPECT_EQ(doc["devices"][0]["maps"], 500);
  EXPECT_EQ(doc["devices"][0]["mean_map_bytes"], 4096);
  EXPECT_EQ(doc["devices"][1]["maps"], 0);
  EXPECT_TRUE(doc["devices"][1]["mean_map_bytes"].is_null());
  EXPECT_FALSE(doc["devices"][2]["present"].get<bool>());
}

TEST(TopTable, ShowsBusyAndGoneDevicesAndSaysWhatItCannotCount) {
  std::string t = app::topTable(view(true), DmaSortKey::Maps, false);
  EXPECT_NE(t.find("IOMMU maps/s 500"), std::string::npos) << t;
  EXPECT_NE(t.find("0000:01:00.0"), std::string::npos);
  EXPECT_EQ(t.find("0000:03:01.0"), std::string::npos);  // idle: left out
  EXPECT_NE(t.find("(gone)"), std::string::npos);
  EXPECT_EQ(t.find("note:"), std::string::npos);
  std::string all = app::topTable(view(true), DmaSortKey::Maps, false, true);
  EXPECT_NE(all.find("0000:03:01.0"), std::string::npos);
  std::string old = app::topTable(view(false), DmaSortKey::Maps, false);
  EXPECT_NE(old.find("note: this kernel has no dma:* tracepoints"), std::string::npos) << old;
}

TEST(TopKeys, EachSortKeyHasAKeyAndAName) {
  for (char k : std::string("mbsofd")) {
    auto key = app::sortKeyFor(k);
    ASSERT_TRUE(key) << k;
    EXPECT_FALSE(app::toString(*key).empty());
  }
  EXPECT_FALSE(app::sortKeyFor('x'));
}

}  // namespace top_test
