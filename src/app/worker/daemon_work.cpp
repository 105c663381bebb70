#include "app/worker/daemon_work.hpp"

#include <cerrno>
#include <chrono>
#include <ctime>

#include "adapters/state/journal.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "app/change/message_ids.hpp"
#include "app/change/outcome_log.hpp"
#include "app/change/planning.hpp"
#include "app/change/reconcile.hpp"
#include "app/change/record_store.hpp"
#include "app/fleet/fleet_files.hpp"
#include "app/measure/effect_watch.hpp"
#include "app/report/host_summary.hpp"
#include "app/report/plan_report.hpp"
#include "support/utc_time.hpp"

namespace iommud::app {

namespace sd = adapters::systemd;
namespace bus = adapters::dbus;
using Clock = std::chrono::steady_clock;
using Priority = sd::Priority;
using OutcomeKind = Outcome::Result;

namespace {

// The devices a change to `address` acts on: a group's type is every endpoint's (its bridges are
// not counted); anything else is the device's own.
std::vector<std::string> endpoints(const core::HostFacts& host, const std::string& address, core::ChangeKind kind) {
  std::vector<std::string> out;
  for (const auto& a : kind == core::ChangeKind::Domain ? host.withGroup(address) : std::vector<std::string>{address}) {
    const auto* m = host.device(a);
    if (m != nullptr && m->kind() != core::DeviceKind::Bridge) out.push_back(a);
  }
  return out;
}

// What an outcome says of its device, for the tallies; nullopt: nothing (kept, skipped for no refusal).
std::optional<DeviceNews> newsOf(const Outcome& o) {
  switch (o.result) {
    case OutcomeKind::Done: return DeviceNews::Tuned;
    case OutcomeKind::Advised: return DeviceNews::Advised;
    case OutcomeKind::Refused:
    case OutcomeKind::Skipped: return isRefusal(o) ? std::optional(DeviceNews::Refused) : std::nullopt;
    case OutcomeKind::Failed: return DeviceNews::Failed;
    default: return std::nullopt;
  }
}

void addOutcome(const Outcome& o, bool revert, WorkerReport& report) {
  report.actions.push_back({support::utcNow(), std::string(toString(o.result)), o.device, bus::oneLine(o.message)});
  if (auto counter = counterKey(o, revert)) report.counters.add(*counter);
}

void callError(const char* name, const std::string& message, WorkerReport& report) {
  report.error = CallError{name, bus::oneLine(message)};
}

}  // namespace

void DaemonWork::logRecovery(const RecoveryReport& r) const {
  log_.write({Priority::Warning,
              std::string(msgid::kRecovered),
              "group " + std::to_string(r.record.change.group) +
                  ": a transaction an earlier process left half-done was " + r.outcome + "; rebound " +
                  std::to_string(r.rebound.size()) + " device(s)",
              {{"IOMMUD_GROUP", std::to_string(r.record.change.group)}}});
}

// Runs in the worker after another died: what it left half-done is finished or rolled back, as
// at start, and the devices it rebinds are reported (their bind events are the daemon's own).
bool DaemonWork::recover(WorkerReport& report) {
  adapters::state::Journal journal(root_.hostPath(state_.runDir + "/transaction.journal"));
  auto recovered = recoverDomainChanges(root_, writer_, journal, ::time(nullptr));
  for (const auto& p : recovered.problems) log_.error(p);
  for (const auto& r : recovered.recovered) {
    logRecovery(r);
    for (const auto& a : r.rebound) report.devices.push_back({DeviceNews::Rebound, a, ""});
  }
  for (const auto& a : recovered.leftUnbound) report.devices.push_back({DeviceNews::Failed, a, ""});
  return true;
}

// Runs in the child (or in this process with --once): reconciles, logs every outcome and
// reports what became of each device; false when the host could not be read. One read of the
// host, whatever the batch holds: its hot and cold devices are planned on the same read.
bool DaemonWork::reconcileBatch(const WorkerRequest& work, WorkerReport& report, std::optional<Status>* unchanged) {
  const Batch& batch = work.batch;
  ReconcileRequest request;
  request.trigger = batch.whole() ? (early_ ? core::Trigger::Boot : core::Trigger::Coldplug) : core::Trigger::Hotplug;
  request.devices = batch.hot;
  request.cold = batch.cold;
  return reconcileSome(request, work, report, unchanged).has_value();
}

std::optional<std::vector<std::string>> DaemonWork::reconcileSome(const ReconcileRequest& asked,
                                                                  const WorkerRequest& work, WorkerReport& report,
                                                                  std::optional<Status>* unchanged) {
  ReconcileRequest request = asked;
  request.adviseOnly = config_.adviseOnly;
  ApplyContext ctx{root_, writer_, nullptr, state_, support::utcNow, {}, &boot_};
  auto start = Clock::now();
  auto done = reconcile(policies_, request, ctx);
  if (!done) {
    log_.error(done.error().describe() + ", ignoring");
    return std::nullopt;
  }
  const auto count = request.devices.size() + request.cold.size();
  log_.debug("worker: read, planned and applied " +
             (count == 0 ? std::string("the whole host") : std::to_string(count) + " device(s)") + " in " +
             std::to_string(std::chrono::duration<double, std::milli>(Clock::now() - start).count()) + " ms");
  auto line = [&](DeviceNews news, const std::string& address) {
    const auto* d = done->host.device(address);
    report.devices.push_back({news, address, d != nullptr ? d->identity() : ""});
  };
  auto tally = [&](DeviceNews news, const std::string& address, core::ChangeKind kind) {
    for (const auto& a : endpoints(done->host, address, kind)) line(news, a);
  };
  // The daemon forgets what it knew of every device this batch decides on, before the news.
  for (const auto* decided : {&done->decided, &done->decidedCold}) {
    for (const auto& address : *decided) {
      for (const auto& a : endpoints(done->host, address, core::ChangeKind::Domain)) line(DeviceNews::Forget, a);
    }
  }
  for (const auto& address : request.trigger == core::Trigger::Hotplug ? done->decided : std::vector<std::string>{}) {
    const auto* d = done->host.device(address);
    if (d == nullptr) continue;
    if (auto it = work.departed.find(d->identity()); it != work.departed.end()) {
      log_.write({Priority::Notice,
                  std::string(msgid::kReplugged),
                  d->displayName() + " (" + d->identity() + ") is back at " + address + " (was " + it->second +
                      "); its policy is applied again",
                  {{"IOMMUD_DEVICE", address}, {"IOMMUD_NAME", d->displayName()}, {"IOMMUD_IDENTITY", d->identity()}}});
      line(DeviceNews::Replugged, address);
    }
  }
  for (const auto& o : done->outcomes) {
    log_.write(journalEntry(o, done->host));
    addOutcome(o, false, report);
    if (auto news = newsOf(o); news && !o.device.empty()) tally(*news, o.device, o.kind);
    // A domain change unbinds and rebinds the group's drivers, done or rolled back.
    if (o.kind == core::ChangeKind::Domain && (o.result == OutcomeKind::Done || o.result == OutcomeKind::Failed) &&
        !o.device.empty()) {
      tally(DeviceNews::Rebound, o.device, o.kind);
    }
  }
  auto changed = effectSubjects(done->outcomes, done->host);
  report.changed.insert(report.changed.end(), changed.begin(), changed.end());
  if (unchanged != nullptr) *unchanged = std::move(done->unchanged);
  for (const auto& s : done->satisfied) {
    log_.debug(s.object + " " + s.key + " is already " + s.value + " (rule " + s.rule.name + ")");
    tally(DeviceNews::Tuned, s.device, s.kind);
  }
  return std::move(done->absent);
}

// Runs in the child: the work's report for the daemon; nullopt when the host could not be read.
std::optional<WorkerReport> DaemonWork::run(const WorkerRequest& work) {
  WorkerReport report;
  switch (work.kind) {
    case WorkerRequest::Kind::View:
      if (!addView(work, work.counters, report)) return std::nullopt;
      return report;
    case WorkerRequest::Kind::Recover:
      if (!recover(report)) return std::nullopt;
      return report;
    case WorkerRequest::Kind::Batch: {
      // The view after the batch (the D-Bus properties, the exports) comes in the same reply when
      // it needs no read of its own: it is the batch's read while nothing the batch did changed
      // the host. After the start and a reload it comes anyway, fresh as soon as READY=1 is.
      // Otherwise the daemon asks for it once the batches and calls waiting are done: a hotplug
      // does not wait for a second read of the host.
      std::optional<Status> unchanged;
      if (!reconcileBatch(work, report, &unchanged)) return std::nullopt;
      if (work.wantsView && (unchanged || work.batch.whole())) {
        Counters counters = work.counters;
        counters += report.counters;
        (void)addView(work, counters, report, std::move(unchanged));
      }
      return report;
    }
    case WorkerRequest::Kind::Call: break;
  }
  runCall(work, report);
  return report;
}

// A D-Bus call, on the host as its own work reads it (once): a device is named as the caller
// named it, and found on that read.
void DaemonWork::runCall(const WorkerRequest& work, WorkerReport& report) {
  const WorkerCall& call = work.call;
  const auto trigger = call.hotplug ? core::Trigger::Hotplug : core::Trigger::Coldplug;
  std::optional<Status> unchanged;  // the host as Apply read it, while nothing it did changed it
  switch (call.kind) {
    case WorkerCall::Kind::Apply: {
      ReconcileRequest request;
      request.trigger = trigger;
      if (!call.device.empty()) request.devices.push_back(call.device);
      auto absent = reconcileSome(request, work, report, &unchanged);
      if (!absent) {
        callError(bus::kErrorFailed, "cannot read the host", report);
      } else if (!absent->empty()) {
        callError(bus::kErrorNoSuchDevice, "no device " + call.device + " on this host", report);
      }
      break;
    }
    case WorkerCall::Kind::Revert: revert(call.device, report); break;
    case WorkerCall::Kind::Plan: plan(trigger, call.device, report); return;  // changes nothing: no view
  }
  if (work.wantsView && unchanged && !report.error) {  // as after a batch: when it needs no read
    Counters counters = work.counters;
    counters += report.counters;
    (void)addView(work, counters, report, std::move(unchanged));
  }
}

void DaemonWork::revert(const std::string& device, WorkerReport& report) {
  ApplyContext ctx{root_, writer_, nullptr, state_, support::utcNow, {}, &boot_};
  auto reverted = revertNamed(device, ctx);
  if (!reverted) {
    const bool unknown = reverted.error().code == ENODEV;
    callError(unknown ? bus::kErrorNoSuchDevice : bus::kErrorFailed, reverted.error().describe(), report);
    return;
  }
  const core::HostFacts& host = reverted->host;
  report.changed = effectSubjects(reverted->outcomes, host);
  for (const auto& o : reverted->outcomes) {
    log_.write(journalEntry(o, host, OutcomeOf::Revert));
    addOutcome(o, true, report);
    if (o.result != OutcomeKind::Done || o.device.empty()) continue;
    for (const auto& a : endpoints(host, o.device, o.kind)) {
      report.devices.push_back({DeviceNews::Forget, a, ""});
      report.devices.push_back({DeviceNews::Reverted, a, ""});
    }
  }
}

void DaemonWork::plan(core::Trigger trigger, const std::string& device, WorkerReport& report) {
  auto view = readHostView(root_, policies_, &boot_);
  if (!view) {
    callError(bus::kErrorFailed, view.error().describe(), report);
    return;
  }
  core::PlanOptions po;
  po.trigger = trigger;
  po.adviseOnly = config_.adviseOnly;
  if (!device.empty()) {
    const auto* d = findDevice(view->status.host, device);
    if (d == nullptr) {
      callError(bus::kErrorNoSuchDevice, "no device " + device + " on this host", report);
      return;
    }
    po.device = d->address;
  }
  const auto& st = view->status;
  auto plan = core::plan({st.host, st.mode, st.findings}, policies_, po);
  listInitramfsFor(root_, plan, view->status);
  report.planJson = planJson(plan, policies_);
}

std::vector<ExportResult> DaemonWork::revertAtStop(Counters& counters) {
  ApplyContext ctx{root_, writer_, nullptr, state_, support::utcNow, {}, &boot_};
  auto reverted = revertNamed("", ctx);
  if (!reverted) {
    log_.error("cannot revert on stop: " + reverted.error().describe());
    return {};
  }
  bool changed = false;
  for (const auto& o : reverted->outcomes) {
    log_.write(journalEntry(o, reverted->host, OutcomeOf::Revert));
    if (auto counter = counterKey(o, true)) counters.add(*counter);
    changed = changed || o.result == OutcomeKind::Done || o.result == OutcomeKind::Failed;
  }
  const auto targets = app::exportTargets(config_);
  if (!targets.any()) return {};
  // What the exports say after the revert: its own read while the revert changed nothing.
  core::HostFacts after = std::move(reverted->host);
  if (changed) {
    auto again = adapters::sysfs::readHost(root_, &boot_);
    if (!again) return {};
    after = std::move(again).value();
  }
  return writeExports(targets, buildStatus(std::move(after)), counters, std::time(nullptr));
}

// Writes the fleet exports that changed; the daemon logs their errors.
void DaemonWork::addExports(const Status& status, const Counters& counters, WorkerReport& report) {
  for (const auto& r : writeExports(app::exportTargets(config_), status, counters, std::time(nullptr))) {
    if (r.error.empty()) log_.debug(r.written ? "wrote " + r.path : r.path + " says this already");
    report.exports.push_back({r.path, r.error});
  }
}

// The host's view (`read`, or read now): writes the fleet exports of it and, with the D-Bus API
// up, puts it in the report as the properties show it (else an empty view: the exports are fresh).
bool DaemonWork::addView(const WorkerRequest& work, const Counters& counters, WorkerReport& report,
                         std::optional<Status> read) {
  if (!read) {
    auto host = adapters::sysfs::readHost(root_, &boot_);
    if (!host) {
      log_.warning("cannot read the host for its view (D-Bus properties, fleet exports): " + host.error().describe());
      return false;
    }
    read = buildStatus(std::move(host).value());
  }
  const Status& status = *read;
  Counters measured = counters;
  if (dma_) {  // this daemon's tracefs instance: the child reads it (and, leaving by _exit, keeps it)
    auto reading = dma_->read();
    if (reading) {
      measured.dma = std::move(reading).value();
    } else {
      log_.warning("cannot read the DMA counters: " + reading.error().describe() + ", exporting without them");
    }
  }
  addExports(status, measured, report);
  // Without the D-Bus API an empty view: the exports are fresh.
  report.host = work.busView ? hostSummaryOf(status, readRecords(root_, state_)) : bus::HostSummary{};
  return true;
}

}  // namespace iommud::app
