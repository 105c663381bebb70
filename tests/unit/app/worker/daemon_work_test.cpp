// What the daemon's worker does with a request, in this process on a synthetic root with the fake
// kernel behind the sysfs writer: no daemon, no child.
#include "app/worker/daemon_work.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "adapters/state/lock.hpp"
#include "config/policy_loader.hpp"
#include "support/fake_kernel.hpp"
#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace daemon_work_test {

using namespace iommud;
using namespace iommud::testing;
using News = app::DeviceNews;

struct Worker {
  std::unique_ptr<FakeHost> host = twoNvmeOneGroup("6.12.48-1");
  FakeKernel kernel{host->root(), {6, 12, 30}};
  adapters::sysfs::Recorder reads;  // each read of the host reads /proc/sys/kernel/osrelease once
  adapters::sysfs::Root root{host->rootString(), &reads};
  app::StatePaths state;
  config::DaemonConfig config;
  core::PolicySet policies = rules(kNvmeIdentity);
  adapters::systemd::Log log{adapters::systemd::Log::Target::Stderr, adapters::systemd::Priority::Err};
  std::optional<adapters::trace::DmaCounters> dma;
  app::DaemonWork work{root, kernel, state, config, policies, false, log, dma};

  long hostReads() const {
    return std::count_if(reads.captures().begin(), reads.captures().end(),
                         [](const auto& c) { return c.path == "/proc/sys/kernel/osrelease"; });
  }

  static app::WorkerRequest call(app::WorkerCall::Kind kind, const std::string& device) {
    app::WorkerRequest request;
    request.kind = app::WorkerRequest::Kind::Call;
    request.call.kind = kind;
    request.call.device = device;
    request.call.hotplug = true;  // as `apply --hotplug`: the disruptive group change allowed
    request.wantsView = true;
    request.busView = true;
    return request;
  }

  std::vector<std::string> nvme() const {
    std::vector<std::string> out;
    for (const auto& d : statusOf(*host).host.devices) {
      if (d.kind() == core::DeviceKind::Nvme) out.push_back(d.address);
    }
    return out;
  }
};

bool has(const app::WorkerReport& r, News news, const std::string& address) {
  return std::any_of(r.devices.begin(), r.devices.end(),
                     [&](const app::DeviceEvent& e) { return e.news == news && e.address == address; });
}

TEST(DaemonWork, AHotplugBatchChangesTheGroupAndSaysWhatBecameOfEachMember) {
  Worker w;
  const auto drives = w.nvme();
  ASSERT_EQ(drives.size(), 2U);
  app::WorkerRequest request;
  request.batch.hot = {drives[0]};  // one drive's plug: the group's change covers both
  auto report = w.work.run(request);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->complete);
  ASSERT_EQ(report->actions.size(), 1U);
  EXPECT_EQ(report->actions[0].result, "done");
  EXPECT_EQ(report->counters.done, 1U);
  for (const auto& d : drives) {
    EXPECT_TRUE(has(*report, News::Forget, d)) << d;
    EXPECT_TRUE(has(*report, News::Tuned, d)) << d;
    EXPECT_TRUE(has(*report, News::Rebound, d)) << d;  // its bind events are the daemon's own
  }
  EXPECT_FALSE(report->host);  // no view asked for
  // The same batch again: the group is as wanted, nothing is done, both count as tuned.
  auto again = w.work.run(request);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->actions.empty());
  for (const auto& d : drives) EXPECT_TRUE(has(*again, News::Tuned, d)) << d;
}

TEST(DaemonWork, AColdBatchLeavesADisruptiveChangeForAHotplug) {
  Worker w;
  app::WorkerRequest request;
  request.batch.cold = w.nvme();
  auto report = w.work.run(request);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->counters.done, 0U);
  EXPECT_TRUE(std::none_of(report->devices.begin(), report->devices.end(),
                           [](const app::DeviceEvent& e) { return e.news == News::Rebound; }));
}

TEST(DaemonWork, AViewIsTheHostAsTheBusShowsItWhenTheBusWantsIt) {
  Worker w;
  app::WorkerRequest request;
  request.kind = app::WorkerRequest::Kind::View;
  request.busView = true;
  auto report = w.work.run(request);
  ASSERT_TRUE(report);
  ASSERT_TRUE(report->host);
  EXPECT_FALSE(report->host->devices.empty());
  request.busView = false;
  auto exportsOnly = w.work.run(request);
  ASSERT_TRUE(exportsOnly && exportsOnly->host);
  EXPECT_TRUE(exportsOnly->host->devices.empty());
}

// One read of the host per batch: the view after it (the D-Bus properties, the exports) is the
// batch's own read while nothing it did changed the host. After a change the reply has no view:
// the daemon asks for one later, and a hotplug does not wait for a second read. Each read of the
// host reads /proc/sys/kernel/osrelease once.
TEST(DaemonWork, TheViewAfterABatchIsTheBatchsOwnReadOrComesLater) {
  Worker w;
  auto& work = w.work;
  auto hostReads = [&] { return w.hostReads(); };
  app::WorkerRequest request;
  request.batch.hot = {w.nvme()[0]};
  request.wantsView = true;
  request.busView = true;

  auto changed = work.run(request);  // the group to identity
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->counters.done, 1U);
  EXPECT_FALSE(changed->host);  // the daemon's View follows
  EXPECT_EQ(hostReads(), 1);

  auto same = work.run(request);  // nothing left to change
  ASSERT_TRUE(same && same->host);
  EXPECT_EQ(same->counters.done, 0U);
  EXPECT_EQ(hostReads(), 2);
  EXPECT_EQ(same->host->devices.size(), statusOf(*w.host).host.devices.size());

  app::WorkerRequest whole;  // the start or a reload: the view comes with it, changed or not
  whole.wantsView = true;
  whole.busView = true;
  auto coldplug = work.run(whole);
  ASSERT_TRUE(coldplug && coldplug->host);
  EXPECT_EQ(hostReads(), 3);
}

// A batch with devices that just appeared and devices that were there: both planned on one
// read, each with its own trigger (the cold one's disruptive change is left for a hotplug).
TEST(DaemonWork, ABatchOfHotAndColdDevicesReadsTheHostOnce) {
  Worker w;
  const auto drives = w.nvme();
  app::WorkerRequest request;
  request.batch.hot = {drives[0]};
  request.batch.cold = {drives[1]};
  request.wantsView = true;
  request.busView = true;
  auto report = w.work.run(request);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->counters.done, 1U);  // the group, once, for the hot drive
  EXPECT_EQ(w.hostReads(), 1);
  EXPECT_TRUE(has(*report, News::Forget, drives[1]));
  EXPECT_TRUE(has(*report, News::Tuned, drives[1]));

  auto again = w.work.run(request);  // nothing left to change: the view is that same read
  ASSERT_TRUE(again && again->host);
  EXPECT_EQ(w.hostReads(), 2);
}

// D-Bus Apply, Plan and Revert for one device: the name is found on the work's own read.
TEST(DaemonWork, ACallForOneDeviceReadsTheHostOnce) {
  Worker w;
  const auto drives = w.nvme();
  using Kind = app::WorkerCall::Kind;

  auto planned = w.work.run(Worker::call(Kind::Plan, drives[0]));
  ASSERT_TRUE(planned && !planned->error && planned->planJson);
  EXPECT_NE(planned->planJson->find(drives[0]), std::string::npos);
  EXPECT_EQ(w.hostReads(), 1);

  auto applied = w.work.run(Worker::call(Kind::Apply, drives[0]));
  ASSERT_TRUE(applied && !applied->error);
  EXPECT_EQ(applied->counters.done, 1U);
  EXPECT_EQ(w.hostReads(), 2);

  auto same = w.work.run(Worker::call(Kind::Apply, drives[0]));  // as wanted: the view is its read
  ASSERT_TRUE(same && !same->error && same->host);
  EXPECT_EQ(w.hostReads(), 3);

  auto reverted = w.work.run(Worker::call(Kind::Revert, drives[0]));
  ASSERT_TRUE(reverted && !reverted->error);
  EXPECT_EQ(reverted->counters.reverted, 1U);
  EXPECT_TRUE(has(*reverted, News::Reverted, drives[0]));
  EXPECT_EQ(w.hostReads(), 4);
}

TEST(DaemonWork, ACallNamingNoDeviceIsRefusedAsNoSuchDevice) {
  Worker w;
  using Kind = app::WorkerCall::Kind;
  for (auto kind : {Kind::Plan, Kind::Apply, Kind::Revert}) {
    auto report = w.work.run(Worker::call(kind, "nvme9"));
    ASSERT_TRUE(report && report->error);
    EXPECT_EQ(report->error->name, adapters::dbus::kErrorNoSuchDevice);
    EXPECT_EQ(report->error->message, "no device nvme9 on this host");
    EXPECT_EQ(report->counters.done, 0U);
  }
  EXPECT_EQ(w.hostReads(), 3);
}

// Revert at stop with the exports on: the exports say what the revert left, from the revert's own
// read while it changed nothing, and from a read after it when it did.
TEST(DaemonWork, RevertAtStopReadsTheHostOnceWhenItChangesNothing) {
  Worker w;
  w.config.prometheus = true;
  w.config.prometheusDirectory = w.host->rootString() + "/metrics";
  ASSERT_TRUE(adapters::state::makeDirectories(w.config.prometheusDirectory));
  app::Counters counters;
  auto nothing = w.work.revertAtStop(counters);
  ASSERT_EQ(nothing.size(), 1U);
  EXPECT_EQ(nothing[0].error, "");
  EXPECT_EQ(w.hostReads(), 1);

  app::WorkerRequest request;
  request.batch.hot = {w.nvme()[0]};
  ASSERT_TRUE(w.work.run(request));
  EXPECT_EQ(w.hostReads(), 2);
  auto reverted = w.work.revertAtStop(counters);
  EXPECT_EQ(counters.reverted, 1U);
  ASSERT_EQ(reverted.size(), 1U);
  EXPECT_EQ(w.hostReads(), 4);  // the revert's read, then the host as the revert left it
}

TEST(DaemonWork, ARecoveryWithNoJournalHasNothingToSay) {
  Worker w;
  app::WorkerRequest request;
  request.kind = app::WorkerRequest::Kind::Recover;
  auto report = w.work.run(request);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->devices.empty());
}

}  // namespace daemon_work_test
