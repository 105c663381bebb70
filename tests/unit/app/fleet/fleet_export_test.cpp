#include "app/fleet/fleet_export.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "app/fleet/fleet_files.hpp"
#include "support/scenarios.hpp"
#include "unit/golden.hpp"
#include "unit/temp_dir.hpp"
#include "unit/test_host.hpp"

namespace fleet_export_test {

using namespace iommud;
using namespace iommud::testing;
namespace fs = std::filesystem;

app::Counters someCounters() {
  app::Counters c;
  for (const char* k :
       {"done", "done", "advised", "refused", "failed", "reverted", "revert-failed", "drift", "bogus"}) {
    c.add(k);
  }
  return c;
}

constexpr int64_t kWhen = 1790000000;

// Label names and values as Kubernetes accepts them (NFD publishes them as node labels): a name of
// at most 63 characters and a value of at most 63, alphanumerics at both ends, '-', '_', '.'
// between; a DNS-subdomain prefix before '/'.
bool validLabelPart(std::string_view s, bool allowEmpty) {
  if (s.empty()) return allowEmpty;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// Checks a feature file against NFD's documented syntax (docs/usage/customization-guide.md, "Input
// format"): "# " comments (no "# +" directives from us), `<namespace>/<name>[=<value>]` lines.
void expectValidFeatureFile(const std::string& text) {
  ASSERT_LE(text.size(), 65536U);  // NFD ignores larger files
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(text.back(), '\n');
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("#")) {
      EXPECT_FALSE(line.starts_with("# +")) << line;
      continue;
    }
    auto eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << line;
    std::string key = line.substr(0, eq);
    std::string value = line.substr(eq + 1);
    auto slash = key.find('/');
    ASSERT_NE(slash, std::string::npos) << "no namespace: " << line;
    EXPECT_EQ(key.substr(0, slash), "feature.node.kubernetes.io") << line;
    EXPECT_TRUE(validLabelPart(key.substr(slash + 1), false)) << line;
    EXPECT_TRUE(validLabelPart(value, true)) << line;
  }
}

using iommud::testing::TempDir;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {(std::istreambuf_iterator<char>(in)), {}};
}

TEST(PrometheusText, MatchesTheGoldenFileForAnIntelGuest) {
  expectGolden("golden/intel_guest_caching_mode.prom",
               app::prometheusText(statusOf(*intelGuestCachingMode()), someCounters(), kWhen));
}

TEST(PrometheusText, MatchesTheGoldenFileForAThunderboltNic) {
  expectGolden("golden/thunderbolt_nic.prom", app::prometheusText(statusOf(*thunderboltNic()), {}, kWhen));
}

TEST(PrometheusText, SaysThereIsNoIommuAndLeavesOutFamiliesWithoutSamples) {
  auto text = app::prometheusText(statusOf(*noIommu()), {}, std::nullopt);
  EXPECT_NE(text.find("iommud_iommu_present 0\n"), std::string::npos);
  EXPECT_NE(text.find("iommud_iommu_info{vendor=\"none\",mode=\"off\"} 1\n"), std::string::npos);
  EXPECT_EQ(text.find("iommud_groups"), std::string::npos);
  EXPECT_EQ(text.find("iommud_last_update_timestamp_seconds"), std::string::npos);
  EXPECT_NE(text.find("iommud_changes_total{result=\"done\"} 0\n"), std::string::npos);
}

TEST(PrometheusText, ShowsAmdNpCache) {
  auto text = app::prometheusText(statusOf(*amdNewFeatures()), {}, kWhen);
  EXPECT_NE(text.find("# TYPE iommud_iommu_unit_np_cache gauge\n"), std::string::npos);
  EXPECT_EQ(text.find("iommud_iommu_unit_rwbf"), std::string::npos);
}

TEST(PrometheusText, CountsEachCounterItsOwnKey) {
  auto text = app::prometheusText(statusOf(*intelBareMetal()), someCounters(), kWhen);
  for (const char* line : {"iommud_changes_total{result=\"done\"} 2", "iommud_changes_total{result=\"advised\"} 1",
                           "iommud_changes_total{result=\"refused\"} 1", "iommud_changes_total{result=\"failed\"} 1",
                           "iommud_reverts_total{result=\"done\"} 1", "iommud_reverts_total{result=\"failed\"} 1",
                           "iommud_drift_total 1", "iommud_last_update_timestamp_seconds 1790000000"}) {
    EXPECT_NE(text.find(std::string(line) + '\n'), std::string::npos) << line;
  }
}

TEST(PrometheusText, IsTheSameMetricsWhateverTheTimestamp) {
  auto s = statusOf(*intelBareMetal());
  EXPECT_TRUE(app::sameMetrics(app::prometheusText(s, {}, kWhen), app::prometheusText(s, {}, kWhen + 60)));
  EXPECT_TRUE(app::sameMetrics(app::prometheusText(s, {}, kWhen), app::prometheusText(s, {}, std::nullopt)));
  EXPECT_FALSE(app::sameMetrics(app::prometheusText(s, {}, kWhen), app::prometheusText(s, someCounters(), kWhen)));
}

// The series of a textfile, "name{labels}" -> how many samples have it: node_exporter refuses
// the whole file when one is there twice ("was collected before with the same name and label values").
std::map<std::string, int> seriesOf(const std::string& text) {
  std::map<std::string, int> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') ++out[line.substr(0, line.rfind(' '))];
  }
  return out;
}

TEST(PrometheusText, CountsRepeatedFindingsInOneSeriesPerIdAndSeverity) {
  auto status = statusOf(*twoNvmePairs());
  ASSERT_EQ(std::count_if(status.findings.begin(), status.findings.end(),
                          [](const core::Finding& f) { return f.id == "vtd-iotlb-sync-map"; }),
            2);
  auto series = seriesOf(app::prometheusText(status, {}, kWhen));
  EXPECT_EQ(series.count(R"(iommud_findings{id="vtd-iotlb-sync-map",severity="warning"})"), 1U);
  auto text = app::prometheusText(status, {}, kWhen);
  EXPECT_NE(text.find("iommud_findings{id=\"vtd-iotlb-sync-map\",severity=\"warning\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("iommud_groups{type=\"DMA-FQ\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("iommud_grouped_devices{type=\"DMA-FQ\"} 11\n"), std::string::npos) << text;
}

TEST(PrometheusText, HasEachSeriesOnceAndABoundedNumberOfThemOnEveryNamedHost) {
  for (const auto& host : {intelBareMetal(), intelGuestCachingMode(), amdOldFeatures(), amdNewFeatures(), armSmmuV3(),
                           noIommu(), thunderboltNic(), twoNvmeOneGroup(), vfioGroup(), twoNvmePairs()}) {
    auto status = statusOf(*host);
    auto series = seriesOf(app::prometheusText(status, someCounters(), kWhen));
    for (const auto& [key, n] : series) EXPECT_EQ(n, 1) << key << " on " << host->rootString();
    // docs/metrics.md, "How many series": 46, and two per IOMMU unit, at most.
    EXPECT_LE(series.size(), 46U + 2U * status.host.units.size()) << host->rootString();
  }
}

// What a daemon measuring for a while on the Thunderbolt NIC host read: the NIC and a device the
// host no longer has.
core::DmaReading someDmaReading(bool attributed) {
  core::DmaReading r;
  r.armed = {core::DmaEvent::Bounced, core::DmaEvent::PageFault, core::DmaEvent::IommuMap, core::DmaEvent::IommuUnmap};
  if (attributed) r.armed.insert({core::DmaEvent::MapPage, core::DmaEvent::UnmapPage});
  r.devices["0000:05:00.0"] = {.maps = 53183, .mappedBytes = 53183ULL * 1514, .unmaps = 53180, .bounces = 53183};
  r.devices["0000:09:00.0"] = {.faults = 3};
  r.host.maps = 120000;
  return r;
}

TEST(PrometheusText, CarriesEachMeasuredDevicesCountersOnceWithItsName) {
  app::Counters counters;
  counters.dma = someDmaReading(true);
  auto text = app::prometheusText(statusOf(*thunderboltNic()), counters, kWhen);
  for (const char* line : {R"(iommud_dma_maps_total{device="0000:05:00.0",name="enp5s0"} 53183)",
                           R"(iommud_dma_mapped_bytes_total{device="0000:05:00.0",name="enp5s0"} 80519062)",
                           R"(iommud_dma_unmaps_total{device="0000:05:00.0",name="enp5s0"} 53180)",
                           R"(iommud_swiotlb_bounces_total{device="0000:05:00.0",name="enp5s0"} 53183)",
                           R"(iommud_iommu_faults_total{device="0000:09:00.0",name="0000:09:00.0"} 3)",
                           "iommud_iommu_page_maps_total 120000", "iommud_dma_maps_attributed 1"}) {
    EXPECT_NE(text.find(std::string(line) + '\n'), std::string::npos) << line << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE iommud_dma_maps_total counter\n"), std::string::npos);
  for (const auto& [key, n] : seriesOf(text)) EXPECT_EQ(n, 1) << key;
  EXPECT_FALSE(app::sameMetrics(text, app::prometheusText(statusOf(*thunderboltNic()), {}, kWhen)));
}

TEST(PrometheusText, LeavesOutPerDeviceMapsWhereTheKernelCannotAttributeThem) {
  app::Counters counters;
  counters.dma = someDmaReading(false);
  auto text = app::prometheusText(statusOf(*thunderboltNic()), counters, kWhen);
  EXPECT_EQ(text.find("iommud_dma_maps_total"), std::string::npos) << text;
  EXPECT_EQ(text.find("iommud_dma_unmaps_total"), std::string::npos) << text;
  EXPECT_NE(text.find("iommud_dma_maps_attributed 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(iommud_swiotlb_bounces_total{device="0000:05:00.0",name="enp5s0"} 53183)"), std::string::npos);
  // Without measuring, none of them.
  EXPECT_EQ(app::prometheusText(statusOf(*thunderboltNic()), {}, kWhen).find("iommud_dma_"), std::string::npos);
}

TEST(CounterKey, CountsRevertsApartAndRefusalsOnlyWhenTheyAreRefusals) {
  app::Outcome o;
  o.result = app::Outcome::Result::Done;
  EXPECT_EQ(app::counterKey(o, false), "done");
  EXPECT_EQ(app::counterKey(o, true), "reverted");
  o.result = app::Outcome::Result::Failed;
  EXPECT_EQ(app::counterKey(o, true), "revert-failed");
  o.result = app::Outcome::Result::Drift;
  EXPECT_EQ(app::counterKey(o, true), "drift");
  o.result = app::Outcome::Result::Kept;
  EXPECT_EQ(app::counterKey(o, true), std::nullopt);
  o.result = app::Outcome::Result::Skipped;
  o.skip = core::SkipReason::HotplugOnly;
  EXPECT_EQ(app::counterKey(o, false), std::nullopt);
  o.result = app::Outcome::Result::Refused;
  EXPECT_EQ(app::counterKey(o, false), "refused");
}

TEST(NfdFeatures, MatchesTheGoldenFileForAThunderboltNic) {
  expectGolden("golden/thunderbolt_nic.nfd", app::nfdFeatures(statusOf(*thunderboltNic())));
}

TEST(NfdFeatures, FollowsNfdsSyntaxOnEveryNamedHost) {
  for (const auto& host :
       {intelBareMetal(), intelGuestCachingMode(), thunderboltNic(), twoNvmeOneGroup(), noIommu(), amdNewFeatures()}) {
    expectValidFeatureFile(app::nfdFeatures(statusOf(*host)));
  }
}

TEST(NfdFeatures, SaysWhetherNvmeGroupsAreIdentityAndLeavesOutKindsNotPresent) {
  auto text = app::nfdFeatures(statusOf(*twoNvmeOneGroup()));
  EXPECT_NE(text.find("feature.node.kubernetes.io/iommud-nvme-identity=false\n"), std::string::npos);
  auto none = app::nfdFeatures(statusOf(*noIommu()));
  EXPECT_NE(none.find("feature.node.kubernetes.io/iommud-iommu-mode=off\n"), std::string::npos);
}

TEST(WriteExports, WritesBothReadableByAllAndLeavesUnchangedFilesAlone) {
  TempDir dir;
  app::ExportTargets targets{(dir.path() / "iommud.prom").string(), (dir.path() / "iommud").string()};
  auto status = statusOf(*thunderboltNic());
  ::umask(077);
  auto first = app::writeExports(targets, status, {}, kWhen);
  ASSERT_EQ(first.size(), 2U);
  for (const auto& r : first) {
    EXPECT_TRUE(r.written) << r.path << ": " << r.error;
    struct stat st {};
    ASSERT_EQ(::stat(r.path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777U, 0644U) << r.path;
  }
  ::umask(022);
  EXPECT_EQ(slurp(dir.path() / "iommud"), app::nfdFeatures(status));
  auto again = app::writeExports(targets, status, {}, kWhen + 60);
  for (const auto& r : again) EXPECT_FALSE(r.written) << r.path;
  EXPECT_NE(slurp(dir.path() / "iommud.prom").find("iommud_last_update_timestamp_seconds 1790000000"),
            std::string::npos);
  auto counted = app::writeExports(targets, status, someCounters(), kWhen + 120);
  EXPECT_TRUE(counted[0].written);
  EXPECT_FALSE(counted[1].written);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2);  // no temporary left
}

TEST(WriteExports, NamesTheFileAndTheReasonWhenTheDirectoryIsMissing) {
  TempDir dir;
  auto path = (dir.path() / "missing" / "iommud.prom").string();
  auto r = app::writeExports({path, std::nullopt}, statusOf(*thunderboltNic()), {}, kWhen);
  ASSERT_EQ(r.size(), 1U);
  EXPECT_EQ(r[0].error, path + ": No such file or directory");
}

// A FIFO at the export once hung the daemon's worker (the old text was read through it), and a link
// was followed: both are replaced by the export, and the link's target is left as it was.
TEST(WriteExports, AFifoOrALinkAtAnExportIsReplacedNeverReadOrFollowed) {
  TempDir dir;
  app::ExportTargets targets{(dir.path() / "iommud.prom").string(), (dir.path() / "iommud").string()};
  ASSERT_EQ(::mkfifo(targets.prometheusFile->c_str(), 0644), 0);
  { std::ofstream(dir.path() / "target") << "secret\n"; }
  fs::create_symlink(dir.path() / "target", *targets.nfdFile);
  auto status = statusOf(*thunderboltNic());
  auto r = app::writeExports(targets, status, {}, kWhen);
  ASSERT_EQ(r.size(), 2U);
  for (const auto& e : r) EXPECT_TRUE(e.written) << e.path << ": " << e.error;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(*targets.prometheusFile)));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(*targets.nfdFile)));
  EXPECT_EQ(slurp(dir.path() / "target"), "secret\n");
  EXPECT_EQ(slurp(dir.path() / "iommud"), app::nfdFeatures(status));
}

TEST(WriteExports, RefusesADirectoryOthersCanWriteAndSaysWhy) {
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::all);
  auto path = (dir.path() / "iommud.prom").string();
  auto r = app::writeExports({path, std::nullopt}, statusOf(*thunderboltNic()), {}, kWhen);
  ASSERT_EQ(r.size(), 1U);
  EXPECT_FALSE(r[0].written);
  EXPECT_EQ(r[0].error, dir.path().string() + ": writable by group or others (mode 0777): refusing to write into it");
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace fleet_export_test
