#include "core/dma_stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dma_stats_test {

using namespace iommud::core;
namespace fs = std::filesystem;

// Recorded in tests/vm guests (tests/data/trace/README.md): Debian's kernels, fio on the NVMe
// drives, the triggers docs/measure.md lists.
std::string recorded(const std::string& kernel, const std::string& file) {
  std::ifstream in(fs::path(IOMMUD_TEST_DATA) / "trace" / kernel / file);
  if (!in) throw std::runtime_error("missing test data trace/" + kernel + "/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Hist hist(const std::string& kernel, const std::string& file) {
  auto h = parseHist(recorded(kernel, file));
  if (!h) throw std::runtime_error(file + ": " + h.error().describe());
  return *h;
}

std::map<DmaEvent, Hist> recordedHists(const std::string& kernel) {
  std::map<DmaEvent, Hist> hists;
  for (const DmaEventSpec& spec : dmaEventSpecs()) {
    std::string file = std::string(spec.system) + "." + std::string(spec.name) + ".hist";
    if (fs::exists(fs::path(IOMMUD_TEST_DATA) / "trace" / kernel / file)) hists[spec.event] = hist(kernel, file);
  }
  return hists;
}

const std::string kEmpty =
    "# event histogram\n#\n# trigger info: hist:keys=device:vals=hitcount:sort=hitcount:size=2048 [active]\n#\n\n\n"
    "Totals:\n    Hits: 0\n    Entries: 0\n    Dropped: 0\n";

TEST(HistParser, ReadsTheMapsOfTwoDrivesOn612) {
  Hist h = hist("6.12", "dma.dma_map_page.hist");
  EXPECT_EQ(h.keyField, "device");
  ASSERT_EQ(h.entries.size(), 2U);
  uint64_t sum = 0;
  for (const auto& e : h.entries) {
    EXPECT_TRUE(e.key == "0000:01:00.0" || e.key == "0000:03:02.0") << e.key;
    sum += e.values.at("hitcount");
    EXPECT_GT(e.values.at("size"), 0U);
  }
  EXPECT_EQ(sum, h.hits);
  EXPECT_EQ(h.dropped, 0U);
}

TEST(HistParser, ReadsAnEmptyHistogram) {
  auto h = parseHist(kEmpty);
  ASSERT_TRUE(h) << h.error().describe();
  EXPECT_TRUE(h->entries.empty());
  EXPECT_EQ(h->hits, 0U);
}

TEST(HistParser, ReadsANumericKeyAndTheDroppedCount) {
  auto h = parseHist(
      "# event histogram\n#\n\n{ common_type:       1265 } hitcount:      10258  size:   42016768\n\n"
      "Totals:\n    Hits: 10300\n    Entries: 1\n    Dropped: 42\n");
  ASSERT_TRUE(h) << h.error().describe();
  EXPECT_EQ(h->keyField, "common_type");
  ASSERT_EQ(h->entries.size(), 1U);
  EXPECT_EQ(h->entries[0].key, "1265");
  EXPECT_EQ(h->entries[0].values.at("size"), 42016768U);
  EXPECT_EQ(h->dropped, 42U);
}

TEST(HistParser, RefusesACutOrGarbledFileNamingTheLine) {
  EXPECT_FALSE(parseHist(""));
  EXPECT_FALSE(parseHist("# event histogram\n{ device: a } hitcount: 1\n"));  // no totals
  auto bad = parseHist("# event histogram\n{ device: a } hitcount: x1\nTotals:\n Hits: 1\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;
  auto twoKeys = parseHist("# event histogram\n{ device: a, dir: 1 } hitcount: 1\nTotals:\n Hits: 1\n");
  EXPECT_FALSE(twoKeys);
  auto after = parseHist("# event histogram\nTotals:\n Hits: 1\n{ device: a } hitcount: 1\n");
  EXPECT_FALSE(after);
  auto mixed =
      parseHist("# event histogram\n{ device: a } hitcount: 1\n{ dev_name: b } hitcount: 1\nTotals:\n Hits: 2\n");
  EXPECT_FALSE(mixed);
}

TEST(EventFormatParser, ReadsTheFieldsOfRecordedFormats) {
  auto f = parseEventFormat(recorded("6.12", "dma.dma_map_page.format"));
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->name, "dma_map_page");
  EXPECT_GT(f->id, 0);
  EXPECT_TRUE(f->has("device"));
  EXPECT_TRUE(f->has("size"));
  EXPECT_TRUE(f->has("common_type"));
  EXPECT_FALSE(f->has("dev_name"));
  auto device = std::ranges::find_if(f->fields, [](const EventField& x) { return x.name == "device"; });
  EXPECT_EQ(device->type, "__data_loc char[]");

  auto b = parseEventFormat(recorded("6.1", "swiotlb.swiotlb_bounced.format"));
  ASSERT_TRUE(b) << b.error().describe();
  EXPECT_TRUE(missingFields(specOf(DmaEvent::Bounced), *b).empty());
  EXPECT_EQ(missingFields(specOf(DmaEvent::MapPage), *b), (std::vector<std::string>{"device"}));  // it has a size
}

TEST(EventFormatParser, EveryEventIsArmableOnTheKernelsThatHaveIt) {
  for (const char* kernel : {"6.1", "6.12"}) {
    for (const DmaEventSpec& spec : dmaEventSpecs()) {
      std::string file = std::string(spec.system) + "." + std::string(spec.name) + ".format";
      if (!fs::exists(fs::path(IOMMUD_TEST_DATA) / "trace" / kernel / file)) {
        EXPECT_EQ(spec.system, "dma") << kernel << " lacks " << file;
        continue;
      }
      auto f = parseEventFormat(recorded(kernel, file));
      ASSERT_TRUE(f) << file;
      EXPECT_TRUE(missingFields(spec, *f).empty()) << kernel << " " << file;
    }
  }
}

TEST(DmaEventSpec, TriggersAreTheDocumentedOnes) {
  EXPECT_EQ(specOf(DmaEvent::MapPage).trigger(), "hist:keys=device:vals=hitcount,size");
  EXPECT_EQ(specOf(DmaEvent::Bounced).trigger(), "hist:keys=dev_name:vals=hitcount,size");
  EXPECT_EQ(specOf(DmaEvent::IommuMap).trigger(), "hist:keys=common_type:vals=hitcount,size");
  EXPECT_EQ(specOf(DmaEvent::PageFault).trigger(), "hist:keys=device:vals=hitcount");
  for (const DmaEventSpec& s : dmaEventSpecs()) EXPECT_EQ(&specOf(s.event), &s);
}

TEST(DmaReading, AttributesMapsToTheDrivesOn612AndAgreesWithTheHostWideCount) {
  DmaReading r = readingFromHists(recordedHists("6.12"));
  EXPECT_TRUE(attributesMaps(r));
  ASSERT_TRUE(r.devices.contains("0000:01:00.0"));
  ASSERT_TRUE(r.devices.contains("0000:03:02.0"));
  EXPECT_FALSE(r.devices.contains("0000:03:01.0"));  // the drive fio did not touch
  const auto& randread = r.devices.at("0000:01:00.0");
  const auto& seq = r.devices.at("0000:03:02.0");
  EXPECT_GT(randread.maps, 1000U);
  EXPECT_EQ(seq.maps, 512U);  // 64 MiB in 128 KiB reads
  EXPECT_EQ(seq.mappedBytes, 64U * 1024 * 1024);
  EXPECT_EQ(randread.unmaps, randread.maps);
  // Every map of a translated drive is an IOMMU map: the host-wide count is at least their sum
  // (the boot's own maps add a few).
  EXPECT_GE(r.host.maps, randread.maps + seq.maps);
  EXPECT_EQ(r.dropped, 0U);
}

TEST(DmaReading, On61OnlyHostWideMapsAndNoAttribution) {
  DmaReading r = readingFromHists(recordedHists("6.1"));
  EXPECT_FALSE(attributesMaps(r));
  EXPECT_TRUE(r.armed.contains(DmaEvent::Bounced));
  EXPECT_TRUE(r.armed.contains(DmaEvent::IommuMap));
  EXPECT_GT(r.host.maps, 1000U);
  for (const auto& [name, d] : r.devices) EXPECT_EQ(d.maps, 0U) << name;
}

DmaReading readingOf(std::map<std::string, DeviceDmaCounters, std::less<>> devices, HostIommuCounters host = {}) {
  DmaReading r;
  r.armed = {DmaEvent::MapPage, DmaEvent::UnmapPage, DmaEvent::Bounced, DmaEvent::IommuMap};
  r.devices = std::move(devices);
  r.host = host;
  return r;
}

DeviceDmaCounters maps(uint64_t n, uint64_t bytes) {
  DeviceDmaCounters c;
  c.maps = n;
  c.unmaps = n;
  c.mappedBytes = bytes;
  return c;
}

TEST(DmaInterval, RatesAndMeanSizeFromTwoReadings) {
  auto before = readingOf({{"0000:01:00.0", maps(1000, 4096000)}}, {1000, 4096000, 900, 0});
  auto after = readingOf({{"0000:01:00.0", maps(3000, 4096000 + 2000 * 1536)}}, {3000, 4096000, 2900, 0});
  auto iv = diffReadings(before, after, 2.0);
  ASSERT_EQ(iv.devices.size(), 1U);
  const auto& d = iv.devices[0];
  EXPECT_EQ(d.delta.maps, 2000U);
  EXPECT_DOUBLE_EQ(d.mapsPerSecond, 1000.0);
  EXPECT_DOUBLE_EQ(*d.meanMapBytes, 1536.0);
  EXPECT_DOUBLE_EQ(d.mappedMiBPerSecond, 2000.0 * 1536 / 2 / (1024 * 1024));
  EXPECT_DOUBLE_EQ(iv.hostMapsPerSecond, 1000.0);
  EXPECT_DOUBLE_EQ(iv.hostUnmapsPerSecond, 1000.0);
  EXPECT_FALSE(iv.restarted);
  EXPECT_TRUE(iv.mapsAttributed);
}

TEST(DmaInterval, ADeviceFirstSeenCountsFromZeroAndAnIdleOneHasNoMeanSize) {
  auto before = readingOf({{"0000:01:00.0", maps(10, 40960)}});
  auto after = readingOf({{"0000:01:00.0", maps(10, 40960)}, {"0000:05:00.0", maps(7, 7 * 256)}});
  auto iv = diffReadings(before, after, 1.0);
  ASSERT_EQ(iv.devices.size(), 2U);
  EXPECT_EQ(iv.devices[0].delta.maps, 0U);
  EXPECT_FALSE(iv.devices[0].meanMapBytes);
  EXPECT_EQ(iv.devices[1].delta.maps, 7U);
  EXPECT_DOUBLE_EQ(*iv.devices[1].meanMapBytes, 256.0);
}

TEST(DmaInterval, ACounterThatWentBackwardsRestarted) {
  auto before = readingOf({{"0000:01:00.0", maps(5000, 5000 * 4096)}}, {5000, 0, 5000, 0});
  auto after = readingOf({{"0000:01:00.0", maps(300, 300 * 4096)}}, {300, 0, 300, 0});
  auto iv = diffReadings(before, after, 1.0);
  EXPECT_TRUE(iv.restarted);
  EXPECT_EQ(iv.devices[0].delta.maps, 300U);
  EXPECT_EQ(iv.host.maps, 300U);
}

TEST(DmaInterval, ScatterGatherMapsCountButHaveNoBytes) {
  DeviceDmaCounters sg;
  sg.maps = 100;
  sg.sgMaps = 100;
  sg.sgEntries = 400;
  auto iv = diffReadings(readingOf({}), readingOf({{"0000:04:00.0", sg}}), 1.0);
  EXPECT_DOUBLE_EQ(iv.devices[0].mapsPerSecond, 100.0);
  EXPECT_FALSE(iv.devices[0].meanMapBytes);  // no single-page maps: no size to average
}

HostFacts hostWithTwoDevices() {
  HostFacts h;
  PciDevice nvme;
  nvme.address = "0000:01:00.0";
  nvme.driver = "nvme";
  nvme.group = 3;
  nvme.nvme.push_back(NvmeController{"nvme0", "", "", {}});
  PciDevice nic;
  nic.address = "0000:04:00.0";
  nic.driver = "e1000e";
  nic.group = 5;
  nic.removable = Removable::Removable;
  PciDevice lonely;
  lonely.address = "0000:06:00.0";
  h.devices = {nvme, nic, lonely};
  h.groups = {Group{3, DomainType::DmaFq, "DMA-FQ", {"0000:01:00.0"}},
              Group{5, DomainType::Identity, "identity", {"0000:04:00.0"}}};
  return h;
}

TEST(DmaRows, JoinTheHostAndShowAnUnpluggedDeviceAsGone) {
  auto iv = diffReadings(
      readingOf({}),
      readingOf({{"0000:01:00.0", maps(10, 40960)}, {"0000:09:00.0", maps(3, 3 * 4096)}, {"virtio0", maps(1, 4096)}}),
      1.0);
  auto rows = dmaRows(iv, hostWithTwoDevices());
  ASSERT_EQ(rows.size(), 5U);
  EXPECT_EQ(rows[0].dma.device, "0000:01:00.0");
  EXPECT_EQ(rows[0].name, "nvme0");
  EXPECT_EQ(rows[0].driver, "nvme");
  EXPECT_EQ(rows[0].translated, std::optional<bool>(true));
  EXPECT_EQ(rows[0].dma.delta.maps, 10U);
  EXPECT_EQ(rows[1].dma.device, "0000:04:00.0");
  EXPECT_EQ(rows[1].translated, std::optional<bool>(false));  // identity
  EXPECT_TRUE(rows[1].untrusted);
  EXPECT_EQ(rows[1].dma.delta.maps, 0U);
  EXPECT_EQ(rows[2].dma.device, "0000:06:00.0");
  EXPECT_EQ(rows[2].translated, std::optional<bool>(false));  // no group: no IOMMU in front
  EXPECT_EQ(rows[3].dma.device, "0000:09:00.0");
  EXPECT_FALSE(rows[3].present);
  EXPECT_EQ(rows[4].dma.device, "virtio0");
  EXPECT_TRUE(rows[4].present);
  EXPECT_FALSE(rows[4].translated);
}

TEST(DmaRows, SortByMapsThenByName) {
  auto iv = diffReadings(readingOf({}),
                         readingOf({{"0000:04:00.0", maps(50, 50 * 256)}, {"0000:01:00.0", maps(10, 40960)}}), 1.0);
  auto rows = dmaRows(iv, hostWithTwoDevices());
  sortRows(rows, DmaSortKey::Maps);
  EXPECT_EQ(rows[0].dma.device, "0000:04:00.0");
  EXPECT_EQ(rows[1].dma.device, "0000:01:00.0");
  EXPECT_EQ(rows[2].dma.device, "0000:06:00.0");
  sortRows(rows, DmaSortKey::MeanSize);
  EXPECT_EQ(rows[0].dma.device, "0000:01:00.0");
  sortRows(rows, DmaSortKey::Device);
  EXPECT_EQ(rows[0].dma.device, "0000:01:00.0");
  EXPECT_EQ(rows[2].dma.device, "0000:06:00.0");
}

}  // namespace dma_stats_test
