// The daemon's hotplug bookkeeping without a loop, a process or udev: events and a clock in,
// verdicts and batches out.
#include "app/daemon/hotplug_filter.hpp"

#include <gtest/gtest.h>

namespace hotplug_filter_test {

namespace app = iommud::app;
using iommud::adapters::udev::UEvent;
using Kind = app::HotplugFilter::Verdict::Kind;
using namespace std::chrono_literals;

constexpr const char* kNvme = "0000:05:00.0";
constexpr const char* kNic = "0000:06:00.0";

UEvent pci(const std::string& action, const std::string& address, bool synthetic = false) {
  return {action, "pci", "/devices/pci0000:00/0000:00:1c.0/" + address, address, synthetic};
}

UEvent nvmeAdd(const std::string& address) {
  return {"add", "nvme", "/devices/pci0000:00/0000:00:1c.0/" + address + "/nvme/nvme0", "nvme0", false};
}

struct Filter {
  app::HotplugFilter f{200ms};
  app::HotplugFilter::TimePoint t0{std::chrono::seconds(1000)};
  app::HotplugFilter::Verdict at(std::chrono::milliseconds when, const UEvent& e, bool stopping = false) {
    return f.event(e, t0 + when, stopping);
  }
  app::Batch batchAt(std::chrono::milliseconds when) {
    f.expire(t0 + when);
    return f.takeQueued();
  }
};

TEST(HotplugFilter, ADevicePlugedInWhileRunningIsHotAndActsOnlyAfterItsEventsWereQuietForTheDebounce) {
  Filter x;
  auto v = x.at(0ms, pci("add", kNvme));
  EXPECT_EQ(v.kind, Kind::Pending);
  EXPECT_EQ(v.address, kNvme);
  EXPECT_TRUE(v.hot);
  EXPECT_TRUE(x.at(150ms, nvmeAdd(kNvme)).hot);  // the debounce starts over
  EXPECT_EQ(x.f.nextDeadline(), x.t0 + 350ms);
  EXPECT_EQ(x.batchAt(349ms), app::Batch{});
  EXPECT_EQ(x.batchAt(350ms), (app::Batch{{kNvme}, {}}));
  EXPECT_FALSE(x.f.nextDeadline());
  EXPECT_FALSE(x.f.hasQueued());
  auto took = x.f.reacted(kNvme, x.t0 + 352ms);
  ASSERT_TRUE(took);
  EXPECT_DOUBLE_EQ(took->count(), 2.0);
  EXPECT_FALSE(x.f.reacted(kNvme, x.t0 + 353ms));  // once per batch
}

TEST(HotplugFilter, WhatWasThereAtStartIsColdWhateverUdevReplaysOfIt) {
  Filter x;
  x.f.present({kNvme});
  EXPECT_FALSE(x.at(0ms, pci("add", kNvme)).hot);
  EXPECT_FALSE(x.at(0ms, pci("add", kNic, true)).hot);  // a replay (SYNTH_UUID) of a device never seen
  EXPECT_EQ(x.batchAt(200ms), (app::Batch{{}, {kNvme, kNic}}));
  // Removed and plugged in again, it is a new device.
  EXPECT_EQ(x.at(300ms, pci("remove", kNvme)).kind, Kind::Removed);
  EXPECT_TRUE(x.at(400ms, pci("add", kNvme)).hot);
}

TEST(HotplugFilter, TheDaemonsOwnRebindIsNoHotplugUntilTheNextPlug) {
  Filter x;
  x.at(0ms, pci("add", kNvme));
  EXPECT_EQ(x.batchAt(200ms), (app::Batch{{kNvme}, {}}));
  x.f.workerStarted();
  EXPECT_TRUE(x.at(210ms, pci("bind", kNvme)).hot);  // the worker's rebind, before its report
  x.f.rebound(kNvme);                                // the report
  x.f.workerDone();
  EXPECT_EQ(x.batchAt(410ms), (app::Batch{{}, {kNvme}}));  // taken back: cold
  EXPECT_FALSE(x.at(500ms, pci("bind", kNvme)).hot);
  EXPECT_TRUE(x.at(600ms, pci("add", kNvme)).hot);
}

TEST(HotplugFilter, AFailedOrRevertedDeviceIsLeftAloneUntilARePlug) {
  Filter x;
  x.f.present({kNvme, kNic});
  x.f.failed(kNvme);
  x.f.reverted(kNic);
  for (const char* a : {kNvme, kNic}) {
    auto v = x.at(0ms, pci("bind", a));
    EXPECT_EQ(v.kind, Kind::LeftAlone);
    EXPECT_FALSE(v.why.empty());
  }
  EXPECT_FALSE(x.f.nextDeadline());
  EXPECT_EQ(x.at(10ms, pci("add", kNvme)).kind, Kind::Pending);
  EXPECT_FALSE(x.f.leftAlone(kNvme));
  EXPECT_TRUE(x.f.leftAlone(kNic));
  x.f.clearLeftAlone();  // a reload
  EXPECT_EQ(x.at(20ms, pci("bind", kNic)).kind, Kind::Pending);
}

TEST(HotplugFilter, APlugWhileTheWorkerRunsIsANewTryWhateverTheWorkerSaysOfTheOldDevice) {
  Filter x;
  x.f.workerStarted();
  x.at(0ms, pci("remove", kNvme));
  x.at(1ms, pci("add", kNvme));
  x.f.failed(kNvme);
  x.f.rebound(kNvme);
  x.f.workerDone();
  EXPECT_FALSE(x.f.leftAlone(kNvme));
  EXPECT_EQ(x.batchAt(201ms), (app::Batch{{kNvme}, {}}));
}

TEST(HotplugFilter, ARemovalWhileTheWorkerRunsIsGoneWhateverTheWorkerSawOfIt) {
  Filter x;
  x.f.present({kNvme, kNic});
  x.at(0ms, pci("change", kNvme));
  x.at(0ms, pci("change", kNic));
  EXPECT_EQ(x.batchAt(200ms), (app::Batch{{}, {kNvme, kNic}}));
  x.f.workerStarted();  // it reads both devices
  x.at(210ms, pci("remove", kNvme));
  x.f.workerDone();
  // The daemon forgets again what the report says of the drive, as at its removal.
  EXPECT_EQ(x.f.removedMeanwhile(), std::set<std::string>{kNvme});
  x.at(220ms, pci("remove", kNic));  // removed when no worker runs: forgotten then, once
  EXPECT_EQ(x.f.removedMeanwhile(), std::set<std::string>{kNvme});
  x.f.workerStarted();  // the next worker starts afresh
  EXPECT_TRUE(x.f.removedMeanwhile().empty());
  x.at(230ms, pci("add", kNvme));  // removed and plugged in again meanwhile: the old device is gone too
  x.at(231ms, pci("remove", kNvme));
  x.at(232ms, pci("add", kNvme));
  x.f.workerDone();
  EXPECT_EQ(x.f.removedMeanwhile(), std::set<std::string>{kNvme});
  EXPECT_EQ(x.batchAt(432ms), (app::Batch{{kNvme}, {}}));  // and the new one is a hotplug
}

TEST(HotplugFilter, ARollbacksEventsMeanwhileAreDroppedWithTheFailure) {
  Filter x;
  x.f.present({kNvme});
  x.f.workerStarted();
  x.at(0ms, pci("bind", kNvme));
  x.f.failed(kNvme);
  x.f.workerDone();
  x.f.dropLeftAlonePending();
  EXPECT_FALSE(x.f.nextDeadline());
  EXPECT_EQ(x.batchAt(300ms), app::Batch{});
}

TEST(HotplugFilter, ARemovalDropsWhatIsPendingAndQueued) {
  Filter x;
  x.at(0ms, pci("add", kNvme));
  x.at(0ms, pci("add", kNic));
  x.f.expire(x.t0 + 200ms);
  x.at(250ms, pci("bind", kNic));
  x.at(260ms, pci("remove", kNvme));
  x.at(270ms, pci("remove", kNic));
  EXPECT_FALSE(x.f.nextDeadline());
  EXPECT_FALSE(x.f.hasQueued());
  EXPECT_FALSE(x.f.reacted(kNvme, x.t0 + 300ms));
}

TEST(HotplugFilter, NothingIsStartedWhileStoppingAndVirtualDevicesAreNoPciFunction) {
  Filter x;
  EXPECT_EQ(x.at(0ms, pci("add", kNvme), true).kind, Kind::Stopping);
  EXPECT_FALSE(x.f.nextDeadline());
  EXPECT_EQ(x.at(0ms, {"add", "block", "/devices/virtual/block/loop0", "loop0", false}).kind, Kind::NotPci);
  EXPECT_EQ(x.at(0ms, {"add", "thunderbolt", "/devices/pci0000:00/0000:00:0d.2/domain0/0-0", "0-0", false}).kind,
            Kind::NotPci);
  EXPECT_FALSE(x.f.nextDeadline());
}

TEST(HotplugFilter, AColdplugTakesWhatIsQueued) {
  Filter x;
  x.at(0ms, pci("add", kNvme));
  x.f.expire(x.t0 + 200ms);
  x.f.dropQueued();
  EXPECT_EQ(x.f.takeQueued(), app::Batch{});
}

TEST(HotplugFilter, AfterLostEventsEveryPresentFunctionIsQueuedInOneBatchAndUnknownOnesAreHot) {
  Filter x;
  constexpr const char* kBridge = "0000:00:1c.0";
  constexpr const char* kGone = "0000:07:00.0";
  x.f.present({kBridge, kNvme, kGone});
  x.at(0ms, pci("change", kNvme));  // pending: the rescan takes it now
  // The monitor overflowed: the NIC's add was lost, the drive at kGone went unheard.
  auto gone = x.f.resync({kBridge, kNvme, kNic}, x.t0 + 10ms);
  EXPECT_EQ(gone, std::vector<std::string>{kGone});
  EXPECT_FALSE(x.f.nextDeadline());
  ASSERT_TRUE(x.f.hasQueued());
  EXPECT_EQ(x.f.takeQueued(), (app::Batch{{kNic}, {kBridge, kNvme}}));
  EXPECT_TRUE(x.f.reacted(kNic, x.t0 + 12ms));
  // The NIC is known from now on: its replayed add is no new plug.
  EXPECT_FALSE(x.at(20ms, pci("add", kNic, true)).hot);
  // kGone is forgotten: plugged in again, it is new.
  EXPECT_TRUE(x.at(30ms, pci("add", kGone)).hot);
}

TEST(HotplugFilter, AfterLostEventsAHotPendingPlugStaysHotAndADeviceLeftAloneStaysAlone) {
  Filter x;
  x.f.present({kNvme});
  x.at(0ms, pci("add", kNic));  // heard: hot, pending
  x.f.reverted(kNvme);
  x.f.resync({kNvme, kNic}, x.t0 + 10ms);
  EXPECT_EQ(x.f.takeQueued(), (app::Batch{{kNic}, {}}));
  EXPECT_TRUE(x.f.leftAlone(kNvme));
}

}  // namespace hotplug_filter_test
