#include "core/measured_findings.hpp"

#include <gtest/gtest.h>

namespace measured_findings_test {

using namespace iommud::core;

DmaRow nic(double mapsPerSecond, double meanBytes, bool translated, uint64_t bounces = 0) {
  DmaRow r;
  r.dma.device = "0000:05:00.0";
  r.name = "enp5s0";
  r.driver = "atlantic";
  r.group = 14;
  r.domain = translated ? DomainType::Dma : DomainType::Identity;
  r.translated = translated;
  r.dma.mapsPerSecond = mapsPerSecond;
  r.dma.delta.maps = static_cast<uint64_t>(mapsPerSecond * 5);
  r.dma.meanMapBytes = meanBytes;
  r.dma.delta.bounces = bounces;
  r.dma.bouncesPerSecond = static_cast<double>(bounces) / 5;
  return r;
}

DmaWindow window(std::vector<DmaRow> rows, bool attributed = true, uint64_t pageBytes = 4096) {
  DmaWindow w;
  w.seconds = 5;
  w.mapsAttributed = attributed;
  w.rows = std::move(rows);
  w.hostMapsPerSecond = 1000;
  w.pageBytes = pageBytes;
  return w;
}

TEST(MeasuredFindings, ATranslatedDeviceMappingManySmallBuffersIsNamed) {
  std::vector<Finding> findings;
  addMeasurements(findings, window({nic(20000, 1514, true)}));
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].id, kSmallMapsId);
  EXPECT_EQ(findings[0].devices, (std::vector<std::string>{"0000:05:00.0"}));
  EXPECT_NE(findings[0].summary.find("20000 buffers/s with a mean of 1514 bytes"), std::string::npos)
      << findings[0].summary;
  ASSERT_EQ(findings[0].remedies.size(), 3U);
  for (const auto& r : findings[0].remedies) EXPECT_EQ(r.securityCost.rfind("none", 0), 0U);
}

TEST(MeasuredFindings, NoSmallMapsFindingForLargeMapsSlowRatesIdentityOrAnOldKernel) {
  for (const auto& w : {window({nic(20000, 4096, true)}), window({nic(500, 256, true)}),
                        window({nic(20000, 256, false)}), window({nic(20000, 256, true)}, false)}) {
    std::vector<Finding> findings;
    addMeasurements(findings, w);
    EXPECT_TRUE(findings.empty());
  }
}

// Small is relative to the host's page: an arm64 kernel with 64 KiB pages maps a 9000-byte jumbo
// frame into a page seven times its size, a 4 KiB-page host maps 3000 bytes into most of one.
TEST(MeasuredFindings, SmallMapsAreSmallForTheHostsPageSize) {
  std::vector<Finding> big;
  addMeasurements(big, window({nic(20000, 9000, true)}, true, 65536));
  ASSERT_EQ(big.size(), 1U);
  EXPECT_EQ(big[0].id, kSmallMapsId);
  EXPECT_NE(big[0].summary.find("a mean of 9000 bytes (pages of 65536)"), std::string::npos) << big[0].summary;
  for (const auto& w : {window({nic(20000, 3000, true)}, true, 4096), window({nic(20000, 9000, true)}, true, 16384),
                        window({nic(20000, 256, true)}, true, 0)}) {
    std::vector<Finding> findings;
    addMeasurements(findings, w);
    EXPECT_TRUE(findings.empty()) << w.pageBytes;
  }
}

TEST(MeasuredFindings, UntrustedBounceAndTheSyncMapRegressionCarryTheNumbers) {
  Finding bounce{"untrusted-bounce", Severity::Warning, "t", "s.", {14}, {"0000:05:00.0"}, {}};
  Finding syncMap{"vtd-iotlb-sync-map", Severity::Warning, "t", "s.", {14}, {"0000:05:00.0"}, {}};
  std::vector<Finding> findings{bounce, syncMap};
  addMeasurements(findings, window({nic(300, 4096, true, 53183)}));
  EXPECT_NE(findings[0].summary.find("Measured over 5.0 s: enp5s0 53183 bounces (10637/s)."), std::string::npos)
      << findings[0].summary;
  EXPECT_NE(findings[1].summary.find("group 14 maps 300 times/s."), std::string::npos) << findings[1].summary;
  std::vector<Finding> old{syncMap};
  addMeasurements(old, window({nic(300, 4096, true)}, false));
  EXPECT_NE(old[0].summary.find("cannot attribute maps"), std::string::npos);
}

TEST(MeasuredFindings, AQuietHostSaysSoInsteadOfInventingAFinding) {
  DmaWindow quiet = window({nic(0, 0, true)});
  quiet.rows[0].dma.delta = {};
  quiet.hostMapsPerSecond = 0;
  std::vector<Finding> findings;
  addMeasurements(findings, quiet);
  EXPECT_TRUE(findings.empty());
  EXPECT_NE(quietWindow(quiet).find("No DMA mapping work in 5.0 s"), std::string::npos);
  EXPECT_TRUE(quietWindow(window({nic(300, 4096, true)})).empty());
}

}  // namespace measured_findings_test
