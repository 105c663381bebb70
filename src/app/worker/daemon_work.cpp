#include "app/worker/daemon_work.hpp"

#include <chrono>
#include <ctime>

#include "adapters/state/journal.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "app/change/message_ids.hpp"
#include "app/change/outcome_log.hpp"
#include "app/change/planning.hpp"
#include "app/change/reconcile.hpp"
#include "app/fleet/fleet_files.hpp"
#include "app/measure/effect_watch.hpp"
#include "app/report/host_summary.hpp"
#include "app/report/plan_report.hpp"

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
  const auto* d = host.device(address);
  const core::Group* group = nullptr;
  for (const auto& g : host.groups) {
    if (kind == core::ChangeKind::Domain && d != nullptr && d->group == g.id) group = &g;
  }
  for (const auto& a : group != nullptr ? group->devices : std::vector<std::string>{address}) {
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
  report.actions.push_back({utcNow(), std::string(toString(o.result)), o.device, bus::oneLine(o.message)});
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
// reports what became of each device; false when the host could not be read.
bool DaemonWork::reconcileBatch(const WorkerRequest& work, WorkerReport& report, std::optional<Status>* unchanged) {
  const Batch& batch = work.batch;
  if (batch.whole()) {
    return reconcileSome(early_ ? core::Trigger::Boot : core::Trigger::Coldplug, {}, work, report, unchanged);
  }
  bool ok = true;
  if (!batch.hot.empty()) ok = reconcileSome(core::Trigger::Hotplug, batch.hot, work, report, unchanged);
  if (!batch.cold.empty()) ok = reconcileSome(core::Trigger::Coldplug, batch.cold, work, report, unchanged) && ok;
  return ok;
}

bool DaemonWork::reconcileSome(core::Trigger trigger, const std::vector<std::string>& devices,
                               const WorkerRequest& work, WorkerReport& report, std::optional<Status>* unchanged) {
  ReconcileRequest request;
  request.trigger = trigger;
  request.devices = devices;
  request.adviseOnly = config_.adviseOnly;
  ApplyContext ctx{root_, writer_, nullptr, state_, utcNow, {}};
  auto start = Clock::now();
  auto done = reconcile(policies_, request, ctx);
  if (!done) {
    log_.error(done.error().describe() + ", ignoring");
    return false;
  }
  log_.debug("worker: read, planned and applied " +
             (devices.empty() ? std::string("the whole host") : std::to_string(devices.size()) + " device(s)") +
             " in " + std::to_string(std::chrono::duration<double, std::milli>(Clock::now() - start).count()) + " ms");
  auto line = [&](DeviceNews news, const std::string& address) {
    const auto* d = done->host.device(address);
    report.devices.push_back({news, address, d != nullptr ? d->identity() : ""});
  };
  auto tally = [&](DeviceNews news, const std::string& address, core::ChangeKind kind) {
    for (const auto& a : endpoints(done->host, address, kind)) line(news, a);
  };
  // The daemon forgets what it knew of every device this batch decides on, before the news.
  for (const auto& address : devices) {
    for (const auto& a : endpoints(done->host, address, core::ChangeKind::Domain)) line(DeviceNews::Forget, a);
  }
  for (const auto& address : trigger == core::Trigger::Hotplug ? devices : std::vector<std::string>{}) {
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
  return true;
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

void DaemonWork::runCall(const WorkerRequest& work, WorkerReport& report) {
  const WorkerCall& call = work.call;
  auto host = adapters::sysfs::readHost(root_);
  if (!host) {
    callError(bus::kErrorFailed, "cannot read the host: " + host.error().describe(), report);
    return;
  }
  std::vector<std::string> devices;
  if (!call.device.empty()) {
    const auto* d = findDevice(*host, call.device);
    if (d == nullptr) {
      callError(bus::kErrorNoSuchDevice, "no device " + call.device + " on this host", report);
      return;
    }
    devices.push_back(d->address);
  }
  const auto trigger = call.hotplug ? core::Trigger::Hotplug : core::Trigger::Coldplug;
  std::optional<Status> unchanged;  // the host as Apply read it, while nothing it did changed it
  switch (call.kind) {
    case WorkerCall::Kind::Apply:
      if (!reconcileSome(trigger, devices, work, report, &unchanged)) {
        callError(bus::kErrorFailed, "cannot read the host", report);
      }
      break;
    case WorkerCall::Kind::Revert: revert(devices, *host, report); break;
    case WorkerCall::Kind::Plan: plan(trigger, devices, report); return;  // changes nothing: no view
  }
  if (work.wantsView && unchanged && !report.error) {  // as after a batch: when it needs no read
    Counters counters = work.counters;
    counters += report.counters;
    (void)addView(work, counters, report, std::move(unchanged));
  }
}

void DaemonWork::revert(const std::vector<std::string>& devices, const core::HostFacts& host, WorkerReport& report) {
  ApplyContext ctx{root_, writer_, nullptr, state_, utcNow, {}};
  auto ethtool = NetlinkEthtool::open(host.kernel.upstream.version);
  if (ethtool) ctx.ethtool = ethtool->get();
  std::optional<std::string> only;
  if (!devices.empty()) only = devices.front();
  auto reverted = revertChanges(only, host, ctx);
  report.changed = effectSubjects(reverted, host);
  for (const auto& o : reverted) {
    log_.write(journalEntry(o, host, OutcomeOf::Revert));
    addOutcome(o, true, report);
    if (o.result != OutcomeKind::Done || o.device.empty()) continue;
    for (const auto& a : endpoints(host, o.device, o.kind)) {
      report.devices.push_back({DeviceNews::Forget, a, ""});
      report.devices.push_back({DeviceNews::Reverted, a, ""});
    }
  }
}

void DaemonWork::plan(core::Trigger trigger, const std::vector<std::string>& devices, WorkerReport& report) {
  auto view = readHostView(root_, policies_);
  if (!view) {
    callError(bus::kErrorFailed, "cannot read the host: " + view.error().describe(), report);
    return;
  }
  core::PlanOptions po;
  po.trigger = trigger;
  po.adviseOnly = config_.adviseOnly;
  if (!devices.empty()) po.device = devices.front();
  const auto& st = view->status;
  auto plan = core::plan({st.host, st.mode, st.findings}, policies_, po);
  listInitramfsFor(root_, plan, view->status);
  report.planJson = planJson(plan, policies_);
}

std::vector<ExportResult> DaemonWork::revertAtStop(Counters& counters) {
  ApplyContext ctx{root_, writer_, nullptr, state_, utcNow, {}};
  auto host = adapters::sysfs::readHost(root_);
  if (!host) {
    log_.error("cannot revert on stop: " + host.error().describe());
    return {};
  }
  for (const auto& o : revertChanges(std::nullopt, *host, ctx)) {
    log_.write(journalEntry(o, *host, OutcomeOf::Revert));
    if (auto counter = counterKey(o, true)) counters.add(*counter);
  }
  const auto targets = app::exportTargets(config_);
  if (!targets.any()) return {};
  auto after = adapters::sysfs::readHost(root_);
  if (!after) return {};
  return writeExports(targets, buildStatus(std::move(after).value()), counters, std::time(nullptr));
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
    auto host = adapters::sysfs::readHost(root_);
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
