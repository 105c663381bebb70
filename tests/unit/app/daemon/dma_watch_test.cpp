#include "app/daemon/dma_watch.hpp"

#include <gtest/gtest.h>

namespace dma_watch_test {

// The bookkeeping of WatchDma: who watches, when measuring starts and stops, and the rows of the
// DmaRates signal. The bus and the tracefs instance are tests/daemon/test_dbus_umockdev.py's.

using namespace iommud;
using Turn = app::DmaWatchers::Turn;

TEST(DmaWatchers, TheFirstWatcherStartsAndTheLastOneLeavingStops) {
  app::DmaWatchers w;
  EXPECT_FALSE(w.any());
  EXPECT_EQ(w.join(":1.7"), Turn::Start);
  EXPECT_EQ(w.join(":1.9"), Turn::Stays);
  EXPECT_EQ(w.leave(":1.7"), Turn::Stays);  // the other one still watches
  EXPECT_TRUE(w.any());
  EXPECT_FALSE(w.has(":1.7"));
  EXPECT_TRUE(w.has(":1.9"));
  EXPECT_EQ(w.leave(":1.9"), Turn::Stop);
  EXPECT_FALSE(w.any());
  EXPECT_EQ(w.join(":1.12"), Turn::Start);  // a new watch after the last one ended
}

TEST(DmaWatchers, WatchingTwiceIsOneWatchAndAStrangerLeavingChangesNothing) {
  app::DmaWatchers w;
  EXPECT_EQ(w.join(":1.7"), Turn::Start);
  EXPECT_EQ(w.join(":1.7"), Turn::Stays);
  EXPECT_EQ(w.leave(":1.8"), Turn::Stays);  // never watched
  EXPECT_EQ(w.leave(":1.7"), Turn::Stop);   // one leave ends its one watch
  EXPECT_EQ(w.leave(":1.7"), Turn::Stays);  // UnwatchDma again, or the bus saying it left after it
}

TEST(DmaRateViews, RowsCarryTopsRatesAndTheHostsNamesElseTheAddress) {
  core::DmaReading before;
  before.armed = {core::DmaEvent::MapPage, core::DmaEvent::Bounced, core::DmaEvent::PageFault};
  before.devices["0000:01:00.0"] = {.maps = 1000, .mappedBytes = 4096U * 1000};
  core::DmaReading after = before;
  after.devices["0000:01:00.0"] = {.maps = 3000, .mappedBytes = 4096U * 3000, .bounces = 20, .faults = 3};
  after.devices["0000:05:00.0"] = {.maps = 10, .mappedBytes = 1048576U * 10};
  const auto interval = core::diffReadings(before, after, 2.0);

  adapters::dbus::HostSummary host;
  host.devices = {{"0000:01:00.0", "nvme0", "nvme", 8, false}, {"0000:05:00.0", "", "xhci_hcd", 9, false}};
  const auto rows = app::dmaRateViews(interval, host);
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0], (adapters::dbus::DmaRateView{"0000:01:00.0", "nvme0", 1000.0, 4096.0 * 1000 / 1048576, 10.0, 3}));
  EXPECT_EQ(rows[1], (adapters::dbus::DmaRateView{"0000:05:00.0", "0000:05:00.0", 5.0, 5.0, 0.0, 0}));
}

}  // namespace dma_watch_test
