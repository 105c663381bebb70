// What the daemon's worker does with a request, in this process on a synthetic root with the fake
// kernel behind the sysfs writer: no daemon, no child.
#include "app/worker/daemon_work.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>

#include "adapters/state/lock.hpp"
#include "app/change/record_store.hpp"
#include "config/policy_loader.hpp"
#include "support/fake_kernel.hpp"
#include "support/scenarios.hpp"
#include "unit/crash_sweep.hpp"
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

// The daemon's own changes swept as apply's are (apply_test.cpp, CrashSweep): killed at each point
// (each sysfs write, before and after, and each step on iommud's own files), or each sysfs write
// failing with EIO, or each own-file step failing with ENOSPC or EIO, the process going on. Then
// the next start (a new worker whose first request is the recovery, as the daemon's start sends
// it): every device bound as at the start or its change recorded, every changed value recorded,
// and revert-on-stop gives back the start exactly.
enum class DaemonScenario {
  HotplugBatch,  // two drives of two groups plugged: both groups to identity
  Reload,        // a reload to a policy with module parameters: the whole host reconciled, as at start
  RevertAtStop,  // then the daemon stopping: every change reverted
};

using crash_sweep::Killed;

struct SweepWorker {
  explicit SweepWorker(DaemonScenario s)
      : host(s == DaemonScenario::Reload ? thunderboltNicWithModule() : twoNvmePairs()),
        policies(rules(s == DaemonScenario::Reload ? "" : kNvmeIdentity)) {}
  std::unique_ptr<FakeHost> host;
  FakeKernel kernel{host->root(), {6, 12, 30}};
  crash_sweep::KillPoints points;
  crash_sweep::KillingWriter writer{kernel, points};
  adapters::sysfs::Root root{host->rootString()};
  app::StatePaths state;
  config::DaemonConfig config;
  core::PolicySet policies;
  adapters::systemd::Log log{adapters::systemd::Log::Target::Stderr, adapters::systemd::Priority::Err};
  std::optional<adapters::trace::DmaCounters> dma;
  app::DaemonWork work{root, writer, state, config, policies, false, log, dma};

  app::WorkerRequest plugged() const {
    app::WorkerRequest request;
    for (const auto& d : statusOf(*host).host.devices) {
      if (d.kind() == core::DeviceKind::Nvme) request.batch.hot.push_back(d.address);
    }
    return request;
  }
};

struct DaemonFault {
  enum Kind { Kill, HostWrite, OwnFile } kind = Kill;
  int at = 0;     // from 1; 0: none
  int error = 0;  // OwnFile's errno (a host write fails with EIO)
};

// One run of `scenario` with `fault`: what was lost (empty: nothing); `points` (when given) the
// kill points and own-file steps of the run without a fault.
std::string runDaemonOnce(DaemonScenario scenario, DaemonFault fault, std::array<int, 3>* points = nullptr) {
  SweepWorker w(scenario);
  const crash_sweep::OwnFilesFaults faults(w.points);
  const auto start = crash_sweep::hostSettings(w.host->root());
  if (scenario == DaemonScenario::RevertAtStop && !w.work.run(w.plugged())) return "the plug before could not run";
  const int seen = w.points.seen;
  const int writes = w.points.writes;
  const int own = w.points.own;
  w.points.killAt = fault.kind == DaemonFault::Kill && fault.at != 0 ? seen + fault.at : 0;
  w.points.failAt = fault.kind == DaemonFault::HostWrite && fault.at != 0 ? writes + fault.at : 0;
  w.points.ownFailAt = fault.kind == DaemonFault::OwnFile && fault.at != 0 ? own + fault.at : 0;
  w.points.ownErrno = fault.error;
  try {
    switch (scenario) {
      case DaemonScenario::HotplugBatch: (void)w.work.run(w.plugged()); break;
      case DaemonScenario::Reload:
        w.policies = rules(kAtlanticItr);  // in place, as the daemon's reload replaces them
        (void)w.work.run(app::WorkerRequest{});
        break;
      case DaemonScenario::RevertAtStop: {
        app::Counters counters;
        (void)w.work.revertAtStop(counters);
        break;
      }
    }
  } catch (const Killed&) {
  }
  if (points != nullptr) *points = {w.points.seen - seen, w.points.writes - writes, w.points.own - own};
  w.points.killAt = 0;
  w.points.failAt = 0;
  w.points.ownFailAt = 0;

  // The next start: a worker of its own, whose first request is the recovery.
  app::DaemonWork next{w.root, w.kernel, w.state, w.config, w.policies, false, w.log, w.dma};
  app::WorkerRequest recover;
  recover.kind = app::WorkerRequest::Kind::Recover;
  if (!next.run(recover)) return "the next start's recovery could not read the host\n";
  std::string problem =
      crash_sweep::unrecorded(start, crash_sweep::hostSettings(w.host->root()), app::readRecords(w.root, w.state));
  app::Counters counters;
  (void)next.revertAtStop(counters);
  if (auto d = crash_sweep::differences(start, crash_sweep::hostSettings(w.host->root())); !d.empty())
    problem += "revert-on-stop did not give back the start:\n" + d;
  if (!app::readRecords(w.root, w.state).empty()) problem += "records left after revert-on-stop\n";
  return problem;
}

struct DaemonSweepResult {
  int points = 0;
  std::vector<std::string> lost;
};

DaemonSweepResult sweepDaemon(DaemonScenario scenario, DaemonFault::Kind kind, int error) {
  const crash_sweep::HostsInMemory inMemory;
  std::array<int, 3> seen{};
  EXPECT_EQ(runDaemonOnce(scenario, {}, &seen), "") << "without a fault";
  DaemonSweepResult out;
  out.points = seen.at(static_cast<size_t>(kind));
  for (int n = 1; n <= out.points; ++n) {
    auto p = runDaemonOnce(scenario, {kind, n, error});
    if (!p.empty()) out.lost.push_back("fault at " + std::to_string(n) + ":\n" + p);
  }
  return out;
}

void expectNothingLost(DaemonScenario scenario, const char* name) {
  const std::pair<DaemonFault, const char*> faults[] = {
      {{DaemonFault::Kill, 0, 0}, "killed at each point"},
      {{DaemonFault::HostWrite, 0, EIO}, "EIO at each sysfs write"},
      {{DaemonFault::OwnFile, 0, ENOSPC}, "ENOSPC at each own-file step"},
      {{DaemonFault::OwnFile, 0, EIO}, "EIO at each own-file step"}};
  for (const auto& [fault, what] : faults) {
    auto r = sweepDaemon(scenario, fault.kind, fault.error);
    EXPECT_GE(r.points, 1) << name << ", " << what;
    std::string all;
    for (const auto& l : r.lost) all += l;
    EXPECT_TRUE(r.lost.empty()) << name << ": " << r.lost.size() << " of " << r.points << " lost something:\n" << all;
    std::printf("daemon %s, %s: %d points, %zu lost\n", name, what, r.points, r.lost.size());
  }
}

TEST(CrashSweep, TheDaemonsHotplugBatchLosesNothingAtAnyPoint) {
  expectNothingLost(DaemonScenario::HotplugBatch, "hotplug batch");
}

TEST(CrashSweep, TheDaemonsReloadLosesNothingAtAnyPoint) {
  expectNothingLost(DaemonScenario::Reload, "reload");
}

TEST(CrashSweep, TheDaemonsRevertAtStopLosesNothingAtAnyPoint) {
  expectNothingLost(DaemonScenario::RevertAtStop, "revert-on-stop");
}

}  // namespace daemon_work_test
