#include "app/daemon.hpp"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "adapters/dbus/manager_service.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "adapters/systemd/worker_process.hpp"
#include "adapters/trace/tracefs.hpp"
#include "adapters/udev/monitor.hpp"
#include "app/bus_view.hpp"
#include "app/daemon_exports.hpp"
#include "app/fleet_files.hpp"
#include "app/hotplug_filter.hpp"
#include "app/message_ids.hpp"
#include "app/outcome_log.hpp"
#include "app/plan_report.hpp"
#include "app/reconcile.hpp"
#include "app/worker_report.hpp"
#include "config/daemon_config.hpp"
#include "core/text.hpp"

namespace iommud::app {

namespace sd = adapters::systemd;
namespace bus = adapters::dbus;
using Clock = std::chrono::steady_clock;
using Priority = sd::Priority;
using OutcomeKind = Outcome::Result;

DaemonPaths daemonPathsFromEnvironment() {
  DaemonPaths p;
  // systemd may pass several colon-separated directories; the first is ours.
  auto first = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    std::string s(v);
    return s.substr(0, s.find(':'));
  };
  if (auto d = first("CONFIGURATION_DIRECTORY")) p.configFile = *d + "/iommud.conf";
  if (auto d = first("RUNTIME_DIRECTORY")) p.state.runDir = *d;
  if (auto d = first("STATE_DIRECTORY")) p.state.stateDir = *d;
  return p;
}

namespace {

Priority priorityOf(config::LogLevel l) {
  switch (l) {
    case config::LogLevel::Error: return Priority::Err;
    case config::LogLevel::Warning: return Priority::Warning;
    case config::LogLevel::Notice: return Priority::Notice;
    case config::LogLevel::Info: return Priority::Info;
    case config::LogLevel::Debug: return Priority::Debug;
  }
  return Priority::Info;
}

/// The configuration and the policies, loaded together: both are valid, or neither is used.
struct Settings {
  config::DaemonConfig config;
  config::Loaded policies;
};

/// Loads both and logs every diagnostic (FILE:LINE:COL), warnings first; the errors are also
/// left in `problems`.
std::optional<Settings> loadSettings(const std::string& root, const std::string& configFile, const sd::Log& log,
                                     std::vector<std::string>& problems) {
  std::vector<std::string> warnings;
  auto take = [&](const std::vector<config::Diagnostic>& diagnostics) {
    for (const auto& d : diagnostics) {
      (d.severity == config::Diagnostic::Severity::Error ? problems : warnings).push_back(d.str());
    }
  };
  std::optional<Settings> settings;
  auto conf = config::loadDaemonConfig(configFile, configOwner());
  take(conf.diagnostics);
  if (conf.ok()) {
    PolicySources sources;
    sources.root = root;
    sources.dirs = conf.config.policyDirs;
    auto loaded = loadPolicies(sources);
    take(loaded.diagnostics);
    if (loaded.ok()) settings = Settings{conf.config, std::move(loaded)};
  }
  for (const auto& w : warnings) log.warning(w);
  for (const auto& p : problems) log.error(p);
  return settings;
}

// What a batch did to each device, as the daemon tallies it for STATUS= (the worker's
// DeviceEvents, worker_report.hpp).
struct Tally {
  std::string identity;
  bool tuned = false, advised = false, refused = false, failed = false;
};

// A D-Bus method the worker does.
struct Call {
  enum class Kind { Plan, Apply, Revert };
  Kind kind = Kind::Apply;
  bool hotplug = false;
  std::string device;  // a PCI address or a name (netdev, NVMe controller); empty: every device
};

// One run of the worker: a batch (the default), a D-Bus call, or a read of the host for the
// D-Bus properties.
struct Work {
  Batch batch;
  std::optional<Call> call;
  bool view = false;
};

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

std::string joined(const std::vector<std::string>& parts, char separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : std::string(1, separator)) + parts[i];
  return out;
}

class Daemon {
 public:
  Daemon(DaemonPaths paths, const sd::Log& log, Settings settings, DaemonOptions options)
      : paths_(std::move(paths)), log_(log), settings_(std::move(settings)), options_(options) {}
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  ~Daemon() {
    calls_.clear();  // their callers hear that they were dropped, while the bus is there
    childCall_.reset();
    service_.reset();
    sd_event_source_unref(debounceTimer_);
    measureTimer_.reset();
    worker_.reset();
    sd_event_source_unref(monitorSource_);
    for (auto* s : signalSources_) sd_event_source_unref(s);
    sd_event_unref(event_);
  }

  int once() {
    if (!begin()) return 1;
    WorkerReport report;
    if (!reconcileBatch({}, report)) return 1;
    absorb(report, true);
    log_.info(statusLine());
    return failed_ ? 1 : 0;
  }

  int run() {
    sigset_t mask;
    sigemptyset(&mask);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&mask, s);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    if (int r = sd_event_new(&event_); r < 0) return fatal("cannot create the event loop", -r);
    worker_.emplace(event_, [this](const sd::WorkerProcess::Exit& e) { childExited(e); });
    if (!begin()) return 1;
    startMeasuring();
    auto monitor = adapters::udev::Monitor::open({"pci", "net", "nvme", "block", "thunderbolt"});
    if (!monitor) return fatal(monitor.error().describe(), 0);
    monitor_.emplace(std::move(monitor).value());
    if (int r = sd_event_add_io(event_, &monitorSource_, monitor_->fd(), EPOLLIN, onUevent, this); r < 0) {
      return fatal("cannot watch the udev monitor", -r);
    }
    for (int s : {SIGTERM, SIGINT, SIGHUP}) {
      sd_event_source* src = nullptr;
      if (int r = sd_event_add_signal(event_, &src, s, onSignal, this); r < 0) return fatal("cannot watch signals", -r);
      signalSources_.push_back(src);
    }
    // Sends WATCHDOG=1 at half of $WATCHDOG_USEC when the service manager asks for it; nothing otherwise.
    (void)sd_event_set_watchdog(event_, 1);
    if (paths_.root == "/") connectBus();  // a synthetic root is no host to answer for on the bus
    // What is there now is no hotplug, whatever udev replays of it later.
    if (auto present = root_.listDir("/sys/bus/pci/devices")) filter_.present(*present);
    coldplugQueued_ = true;
    startNext();
    int r = sd_event_loop(event_);
    if (r < 0) return fatal("the event loop failed", -r);
    return r;
  }

 private:
  int fatal(const std::string& what, int err) {
    log_.error(err != 0 ? what + ": " + std::strerror(err) : what);
    return 1;
  }

  // Lock and recovery: what every writer does first.
  bool begin() {
    ApplyContext ctx = context();
    auto session = beginWriting(ctx);
    if (!session) {
      log_.error(session.error().describe());
      return false;
    }
    if (session->recovered) {
      const auto& r = *session->recovered;
      log_.write({Priority::Warning,
                  std::string(msgid::kRecovered),
                  "group " + std::to_string(r.record.change.group) +
                      ": a transaction an earlier process left half-done was " + r.outcome + "; rebound " +
                      std::to_string(r.rebound.size()) + " device(s)",
                  {{"IOMMUD_GROUP", std::to_string(r.record.change.group)}}});
    }
    if (session->recovered) {
      for (const auto& a : session->recovered->rebound) filter_.rebound(a);
    }
    session_.emplace(std::move(session).value());
    return true;
  }

  ApplyContext context() { return ApplyContext{root_, writer_, nullptr, paths_.state, utcNow, {}}; }

  // --- the work: one batch of devices (or the whole host), reconciled and reported -------------

  // Runs in the child (or in this process with --once): reconciles, logs every outcome and
  // reports what became of each device; false when the host could not be read.
  bool reconcileBatch(const Batch& batch, WorkerReport& report) {
    if (batch.whole()) return reconcileSome(options_.early ? core::Trigger::Boot : core::Trigger::Coldplug, {}, report);
    bool ok = true;
    if (!batch.hot.empty()) ok = reconcileSome(core::Trigger::Hotplug, batch.hot, report);
    if (!batch.cold.empty()) ok = reconcileSome(core::Trigger::Coldplug, batch.cold, report) && ok;
    return ok;
  }

  bool reconcileSome(core::Trigger trigger, const std::vector<std::string>& devices, WorkerReport& report) {
    ReconcileRequest request;
    request.trigger = trigger;
    request.devices = devices;
    request.adviseOnly = settings_.config.adviseOnly;
    ApplyContext ctx = context();
    auto start = Clock::now();
    auto done = reconcile(settings_.policies.policies, request, ctx);
    if (!done) {
      log_.error(done.error().describe() + ", ignoring");
      return false;
    }
    log_.debug("worker: read, planned and applied " +
               (devices.empty() ? std::string("the whole host") : std::to_string(devices.size()) + " device(s)") +
               " in " + std::to_string(std::chrono::duration<double, std::milli>(Clock::now() - start).count()) +
               " ms");
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
      if (auto it = departed_.find(d->identity()); it != departed_.end()) {
        log_.write(
            {Priority::Notice,
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
    for (const auto& s : done->satisfied) {
      log_.debug(s.object + " " + s.key + " is already " + s.value + " (rule " + s.rule.name + ")");
      tally(DeviceNews::Tuned, s.device, s.kind);
    }
    return true;
  }

  // What an outcome says of its device, for the tallies; nullopt: nothing (kept, skipped for no refusal).
  static std::optional<DeviceNews> newsOf(const Outcome& o) {
    switch (o.result) {
      case OutcomeKind::Done: return DeviceNews::Tuned;
      case OutcomeKind::Advised: return DeviceNews::Advised;
      case OutcomeKind::Refused:
      case OutcomeKind::Skipped: return isRefusal(o) ? std::optional(DeviceNews::Refused) : std::nullopt;
      case OutcomeKind::Failed: return DeviceNews::Failed;
      default: return std::nullopt;
    }
  }

  static void addOutcome(const Outcome& o, bool revert, WorkerReport& report) {
    report.actions.push_back({utcNow(), std::string(toString(o.result)), o.device, bus::oneLine(o.message)});
    if (auto counter = counterKey(o, revert)) report.counters.add(*counter);
  }

  static void callError(const char* name, const std::string& message, WorkerReport& report) {
    report.error = CallError{name, bus::oneLine(message)};
  }

  // Runs in the child: the work's report for the daemon; nullopt when the host could not be read.
  std::optional<WorkerReport> runWork(const Work& work) {
    WorkerReport report;
    if (work.view) {
      if (!addView(counters_, report)) return std::nullopt;
      return report;
    }
    if (!work.call) {
      if (!reconcileBatch(work.batch, report)) return std::nullopt;
      // After the start and a reload, the properties and the exports are fresh as soon as READY=1 is.
      if (work.batch.whole() && wantsView()) {
        Counters counters = counters_;
        counters += report.counters;
        (void)addView(counters, report);
      }
      return report;
    }
    const Call& call = *work.call;
    auto host = adapters::sysfs::readHost(root_);
    if (!host) {
      callError(bus::kErrorFailed, "cannot read the host: " + host.error().describe(), report);
      return report;
    }
    std::vector<std::string> devices;
    if (!call.device.empty()) {
      const auto* d = findDevice(*host, call.device);
      if (d == nullptr) {
        callError(bus::kErrorNoSuchDevice, "no device " + call.device + " on this host", report);
        return report;
      }
      devices.push_back(d->address);
    }
    const auto trigger = call.hotplug ? core::Trigger::Hotplug : core::Trigger::Coldplug;
    switch (call.kind) {
      case Call::Kind::Apply:
        if (!reconcileSome(trigger, devices, report)) callError(bus::kErrorFailed, "cannot read the host", report);
        break;
      case Call::Kind::Revert: revert(devices, *host, report); break;
      case Call::Kind::Plan: plan(trigger, devices, report); break;
    }
    return report;
  }

  void revert(const std::vector<std::string>& devices, const core::HostFacts& host, WorkerReport& report) {
    ApplyContext ctx = context();
    auto ethtool = NetlinkEthtool::open(host.kernel.upstream.version);
    if (ethtool) ctx.ethtool = ethtool->get();
    std::optional<std::string> only;
    if (!devices.empty()) only = devices.front();
    for (const auto& o : revertChanges(only, host, ctx)) {
      auto e = journalEntry(o, host);
      if (o.result == OutcomeKind::Done) e.messageId = std::string(msgid::kReverted);
      log_.write(e);
      addOutcome(o, true, report);
      if (o.result != OutcomeKind::Done || o.device.empty()) continue;
      for (const auto& a : endpoints(host, o.device, o.kind)) {
        report.devices.push_back({DeviceNews::Forget, a, ""});
        report.devices.push_back({DeviceNews::Reverted, a, ""});
      }
    }
  }

  void plan(core::Trigger trigger, const std::vector<std::string>& devices, WorkerReport& report) {
    auto view = readHostView(root_, settings_.policies.policies);
    if (!view) {
      callError(bus::kErrorFailed, "cannot read the host: " + view.error().describe(), report);
      return;
    }
    core::PlanOptions po;
    po.trigger = trigger;
    po.adviseOnly = settings_.config.adviseOnly;
    if (!devices.empty()) po.device = devices.front();
    const auto& st = view->status;
    auto plan = core::plan({st.host, st.mode, st.findings}, settings_.policies.policies, po);
    report.planJson = planJson(plan, settings_.policies.policies);
  }

  // Whether anyone wants a view of the host after it may have changed: the D-Bus properties, the
  // fleet exports.
  [[nodiscard]] bool wantsView() const { return service_ || exportTargets().any(); }

  [[nodiscard]] ExportTargets exportTargets() const { return app::exportTargets(settings_.config); }

  // Writes the fleet exports that changed; the daemon logs their errors.
  void addExports(const Status& status, const Counters& counters, WorkerReport& report) {
    for (const auto& r : writeExports(exportTargets(), status, counters, std::time(nullptr))) {
      if (r.error.empty()) log_.debug(r.written ? "wrote " + r.path : r.path + " says this already");
      report.exports.push_back({r.path, r.error});
    }
  }

  // Reads the host for its view: writes the fleet exports of it and, with the D-Bus API up, puts
  // it in the report as the properties show it (else an empty view: the exports are fresh).
  bool addView(const Counters& counters, WorkerReport& report) {
    auto host = adapters::sysfs::readHost(root_);
    if (!host) {
      log_.warning("cannot read the host for its view (D-Bus properties, fleet exports): " + host.error().describe());
      return false;
    }
    auto status = buildStatus(std::move(host).value());
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
    report.host = service_ ? hostSummaryOf(status, readRecords(root_, paths_.state)) : bus::HostSummary{};
    return true;
  }

  // What a child's work said, beyond the tallies: the D-Bus caller's answer, RecentActions, Acted.
  void report(WorkerReport r, bool exitedOk) {
    const Work& work = childWork_;
    const bool plan = work.call && work.call->kind == Call::Kind::Plan;
    if (!plan && !work.view) lastRunAt_ = utcNow();
    busView_.acted(r.actions);
    if (childCall_ && work.call) {
      bus::PendingCall reply = std::move(*childCall_);
      childCall_.reset();
      if (r.error) {
        reply.replyError(r.error->name.c_str(), r.error->message);
      } else if (!exitedOk) {
        reply.replyError(bus::kErrorFailed, "the work was cut short; the journal says why");
      } else if (work.call->kind == Call::Kind::Plan) {
        reply.replyText(r.planJson.value_or(""));
      } else {
        reply.replyActions(r.actions);
      }
    }
    counters_ += r.counters;
    for (const auto& e : r.exports) exported(e.path, e.error);
    if (r.host && busView_.take(*r.host) && service_)
      service_->propertiesChanged(bus::ManagerService::Properties::Host);
    if (!wantsView() || work.view || plan) return;
    if (!r.host) viewStale_ = true;
    if (!service_) return;
    if (!r.actions.empty()) service_->acted(triggerName(work), r.actions);
    service_->propertiesChanged(bus::ManagerService::Properties::Daemon);
  }

  // An export that cannot be written is said once per reason, not at every change of the host.
  void exported(const std::string& path, const std::string& error) {
    auto note = exportErrors_.note(path, error);
    if (!note) return;
    if (note->warning) {
      log_.warning(note->message);
    } else {
      log_.notice(note->message);
    }
  }

  static std::string triggerName(const Work& w) {
    if (w.call) {
      switch (w.call->kind) {
        case Call::Kind::Apply: return "apply";
        case Call::Kind::Revert: return "revert";
        case Call::Kind::Plan: return "plan";
      }
    }
    if (w.batch.whole()) return "coldplug";
    return w.batch.hot.empty() ? "change" : "hotplug";
  }

  // Takes a batch's news of devices into the daemon's view of them.
  void absorb(const WorkerReport& report, bool wholeHost) {
    if (wholeHost) {
      tallies_.clear();
      filter_.clearLeftAlone();
    }
    for (const auto& [news, address, identity] : report.devices) {
      if (news == DeviceNews::Forget) {
        tallies_.erase(address);
        filter_.forgetLeftAlone(address);
        continue;
      }
      auto& t = tallies_[address];
      t.identity = identity;
      switch (news) {
        case DeviceNews::Tuned: t.tuned = true; break;
        case DeviceNews::Advised: t.advised = true; break;
        case DeviceNews::Refused: t.refused = true; break;
        case DeviceNews::Failed:
          t.failed = true;
          failed_ = true;
          filter_.failed(address);
          break;
        case DeviceNews::Replugged: departed_.erase(t.identity); break;
        case DeviceNews::Reverted: filter_.reverted(address); break;
        case DeviceNews::Rebound: filter_.rebound(address); break;
        case DeviceNews::Forget: break;
      }
    }
  }

  std::string statusLine() const {
    size_t tuned = 0, advised = 0, refused = 0, failed = 0;
    for (const auto& [_, t] : tallies_) {
      if (t.failed) {
        ++failed;
      } else if (t.tuned) {
        ++tuned;
      }
      if (t.advised) ++advised;
      if (t.refused) ++refused;
    }
    return std::to_string(tuned) + " devices tuned, " + std::to_string(advised) + " advised, " +
           std::to_string(refused) + " refused, " + std::to_string(failed) + " failed";
  }

  // --- measuring ([measure], docs/measure.md "In the daemon") -------------------------------------

  // The daemon's own tracefs instance, read by each view of the host for the Prometheus export,
  // and a timer that asks for a view every interval so that the exported counters move. Anything
  // it had before goes first (a reload that changed the settings starts counting afresh).
  void startMeasuring() {
    measureTimer_.reset();
    dma_.reset();  // removes the instance
    const auto& c = settings_.config;
    if (!c.measure || !root_.isLive()) return;
    if (!c.prometheus) {
      log_.notice("[measure] is on, but its counters go to the Prometheus export, which is off: not measuring");
      return;
    }
    auto counters = adapters::trace::DmaCounters::open(root_);
    if (!counters) {
      log_.warning("cannot measure DMA: " + counters.error().describe() +
                   "; the Prometheus export goes on without the DMA counters");
      return;
    }
    for (const auto& name : counters->sweep().removed)
      log_.info("removed tracing instance " + name + ", left by a process that is gone");
    dma_.emplace(std::move(counters).value());
    log_.info("measuring DMA in tracing instance " + dma_->instance() + ", exported every " +
              std::to_string(c.measureInterval.count()) + " s");
    sd_event_source* timer = nullptr;
    if (int r = sd_event_add_time_relative(event_, &timer, CLOCK_MONOTONIC, measureIntervalUsec(), kMeasureAccuracyUsec,
                                           onMeasureTimer, this);
        r < 0) {
      log_.error(std::string("cannot arm the measuring timer: ") + std::strerror(-r) + ", exporting only on changes");
      return;
    }
    measureTimer_.reset(timer);
  }

  [[nodiscard]] uint64_t measureIntervalUsec() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(settings_.config.measureInterval).count());
  }

  static int onMeasureTimer(sd_event_source* s, uint64_t usec, void* self) {
    auto* d = static_cast<Daemon*>(self);
    (void)sd_event_source_set_time(s, usec + d->measureIntervalUsec());
    (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
    d->viewStale_ = true;
    d->startNext();
    return 0;
  }

  // --- the child ---------------------------------------------------------------------------------

  // The next work, most urgent first: the whole host (start, reload), devices that appeared or
  // changed, D-Bus calls in their order, then a fresh view of the host for the properties.
  void startNext() {
    if (working() || stopping_) return;
    Work work;
    if (coldplugQueued_) {
      coldplugQueued_ = false;
      filter_.dropQueued();
    } else if (filter_.hasQueued()) {
      work.batch = filter_.takeQueued();
    } else if (!calls_.empty()) {
      work.call = calls_.front().first;
      childCall_.emplace(std::move(calls_.front().second));
      calls_.pop_front();
    } else if (wantsView() && viewStale_) {
      work.view = true;
      viewStale_ = false;
    } else {
      return;
    }
    childWork_ = std::move(work);
    filter_.workerStarted();
    auto started = worker_->start([this] {
      auto report = runWork(childWork_);
      return sd::WorkerProcess::Result{encodeReport(report.value_or(WorkerReport{})), report ? 0 : 1};
    });
    if (!started) {  // the work is dropped; a D-Bus caller hears why
      log_.error(started.error().describe() + ", ignoring this work");
      if (childCall_) childCall_->replyError(bus::kErrorFailed, started.error().describe());
      childCall_.reset();
      childWork_ = {};
      filter_.workerDone();
    }
  }

  [[nodiscard]] bool working() const { return worker_ && worker_->running(); }

  void childExited(const sd::WorkerProcess::Exit& e) {
    filter_.workerDone();
    if (!e.exited) {
      log_.error("the worker for " + describeBatch() + " was killed by signal " + std::to_string(e.status) +
                 "; the next start recovers any half-done transaction");
    }
    const Work& work = childWork_;
    const bool wholeHost = (!work.call && !work.view && work.batch.whole()) ||
                           (work.call && work.call->kind == Call::Kind::Apply && work.call->device.empty());
    auto decoded = decodeReport(e.output);
    if (!decoded && e.exited) log_.error("the worker for " + describeBatch() + ": " + decoded.error().describe());
    WorkerReport news = decoded ? std::move(decoded).value() : WorkerReport{};
    absorb(news, wholeHost);
    // The worker read the host before these went: they are gone, whatever it said of them.
    for (const auto& a : filter_.removedMeanwhile()) forget(a);
    report(std::move(news), e.exited && e.status == 0);
    // The events a failed change's rollback caused while the worker ran are no new plug.
    filter_.dropLeftAlonePending();
    armDebounce();
    auto now = Clock::now();
    for (const auto& a : batchDevices()) {
      if (auto took = filter_.reacted(a, now)) {
        // IOMMUD_HANDLED: what tests wait for to know that the device's events so far are handled.
        log_.write({Priority::Debug,
                    "",
                    "reacted to " + a + " in " + std::to_string(took->count()) + " ms",
                    {{"IOMMUD_HANDLED", a}}});
      }
    }
    const bool coldplug = !work.call && !work.view && work.batch.whole();
    childWork_ = {};
    if (coldplug && !ready_) {
      ready_ = true;
      log_.write({Priority::Info, std::string(msgid::kStarted), "iommud started: " + statusLine(), {}});
      sd_notifyf(0, "READY=1\nSTATUS=%s", statusLine().c_str());
    } else {
      sd_notifyf(0, "STATUS=%s", statusLine().c_str());
    }
    if (service_ && coldplug) service_->propertiesChanged(bus::ManagerService::Properties::Daemon);  // State
    if (stopping_) {
      stop();
      return;
    }
    startNext();
  }

  // --- D-Bus -------------------------------------------------------------------------------------

  void connectBus() {
    bus::ManagerService::Handlers h;
    h.host = [this]() -> const bus::HostSummary& { return busView_.host(); };
    h.daemon = [this] { return daemonSummary(); };
    h.plan = [this](bus::PendingCall reply, bool hotplug, std::string device) {
      enqueue({Call::Kind::Plan, hotplug, std::move(device)}, std::move(reply));
    };
    h.apply = [this](bus::PendingCall reply, bool hotplug, std::string device) {
      enqueue({Call::Kind::Apply, hotplug, std::move(device)}, std::move(reply));
    };
    h.revert = [this](bus::PendingCall reply, std::string device) {
      enqueue({Call::Kind::Revert, false, std::move(device)}, std::move(reply));
    };
    h.reload = [this](bus::PendingCall reply) {
      auto problems = reload();
      if (problems.empty()) {
        reply.replyEmpty();
      } else {
        reply.replyError(bus::kErrorInvalidPolicy, joined(problems, '\n'));
      }
    };
    h.nameLost = [this](const std::string& why) {
      log_.warning("no D-Bus API: the bus refused the name " + std::string(bus::kBusName) + " (" + why +
                   "); is /usr/share/dbus-1/system.d/org.iommud1.conf installed?");
    };
    auto service = bus::ManagerService::start(event_, std::move(h));
    if (!service) {
      log_.notice("no D-Bus API (" + service.error().describe() + "); iommuctl works on the host itself");
      return;
    }
    service_ = std::move(service).value();
  }

  // A D-Bus call waits for the worker like any batch. Plan is anyone's: its own, small bound, so
  // that unprivileged callers cannot crowd out root's Apply and Revert.
  static constexpr size_t kMaxWaitingCalls = 32;
  static constexpr size_t kMaxWaitingPlans = 4;

  void enqueue(Call call, bus::PendingCall reply) {
    if (stopping_) {
      reply.replyError(bus::kErrorStopping, "iommud is stopping");
      return;
    }
    const bool plan = call.kind == Call::Kind::Plan;
    size_t waiting = 0;
    for (const auto& [c, _] : calls_) waiting += (c.kind == Call::Kind::Plan) == plan ? 1 : 0;
    if (waiting >= (plan ? kMaxWaitingPlans : kMaxWaitingCalls)) {
      reply.replyError(bus::kErrorFailed, std::to_string(waiting) + " such calls are waiting already; try later");
      return;
    }
    calls_.emplace_back(std::move(call), std::move(reply));
    startNext();
  }

  bus::DaemonSummary daemonSummary() const {
    return {stopping_ ? "stopping" : (ready_ ? "running" : "starting"),      statusLine(),     startedAt_, lastRunAt_,
            static_cast<uint32_t>(settings_.policies.policies.rules.size()), busView_.recent()};
  }

  std::string describeBatch() const {
    if (childWork_.view) return "the D-Bus view of the host";
    if (childWork_.call) return "a D-Bus call";
    auto all = batchDevices();
    if (all.empty()) return "the whole host";
    return all.size() == 1 ? all.front() : std::to_string(all.size()) + " devices";
  }

  std::vector<std::string> batchDevices() const {
    auto all = childWork_.batch.hot;
    all.insert(all.end(), childWork_.batch.cold.begin(), childWork_.batch.cold.end());
    return all;
  }

  // --- events ------------------------------------------------------------------------------------

  static int onUevent(sd_event_source* /*s*/, int /*fd*/, uint32_t /*revents*/, void* self) {
    auto* d = static_cast<Daemon*>(self);
    while (auto e = d->monitor_->receive()) d->uevent(*e);
    return 0;
  }

  void uevent(const adapters::udev::UEvent& e) {
    using Kind = HotplugFilter::Verdict::Kind;
    auto v = filter_.event(e, Clock::now(), stopping_);
    if (v.address.empty()) {
      if (e.subsystem == "thunderbolt") log_.debug("thunderbolt " + e.action + " " + e.sysname);
      return;  // virtual: loop, dm, veth
    }
    log_.debug(e.subsystem + " " + e.action + " " + e.sysname + " (" + v.address + ")" +
               (e.synthetic ? " (replayed)" : ""));
    switch (v.kind) {
      case Kind::Removed:
        forget(v.address);
        startNext();  // a fresh view: the D-Bus properties and the exports must not show it
        break;
      case Kind::LeftAlone:
        log_.debug("ignoring " + e.action + " of " + v.address + ": " + v.why + "; a re-plug or a reload acts again");
        break;
      case Kind::Pending: armDebounce(); break;
      case Kind::NotPci:
      case Kind::Stopping: break;
    }
  }

  // What the daemon knew of a device that went; it is remembered only by identity, if it was tuned.
  void forget(const std::string& address) {
    armDebounce();
    viewStale_ = true;
    if (auto it = tallies_.find(address); it != tallies_.end()) {
      if (it->second.tuned && !it->second.identity.empty()) departed_[it->second.identity] = address;
      tallies_.erase(it);
      sd_notifyf(0, "STATUS=%s", statusLine().c_str());
    }
  }

  // One timer, at the end of the earliest pending debounce: acting waits until a device's events
  // have been quiet for the debounce.
  void armDebounce() {
    auto next = filter_.nextDeadline();
    if (!next) {
      if (debounceTimer_ != nullptr) (void)sd_event_source_set_enabled(debounceTimer_, SD_EVENT_OFF);
      return;
    }
    // steady_clock is CLOCK_MONOTONIC, as sd-event's timer.
    auto usec =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(next->time_since_epoch()).count());
    if (debounceTimer_ != nullptr) {
      (void)sd_event_source_set_time(debounceTimer_, usec);
      (void)sd_event_source_set_enabled(debounceTimer_, SD_EVENT_ONESHOT);
      return;
    }
    if (int r = sd_event_add_time(event_, &debounceTimer_, CLOCK_MONOTONIC, usec, 1000, onDebounced, this); r < 0) {
      log_.error(std::string("cannot arm the debounce timer: ") + std::strerror(-r) +
                 ", ignoring the events meanwhile");
    }
  }

  static int onDebounced(sd_event_source* /*s*/, uint64_t /*usec*/, void* self) {
    auto* d = static_cast<Daemon*>(self);
    d->filter_.expire(Clock::now());
    d->armDebounce();
    d->startNext();
    return 0;
  }

  static int onSignal(sd_event_source* /*s*/, const struct signalfd_siginfo* si, void* self) {
    auto* d = static_cast<Daemon*>(self);
    if (si->ssi_signo == SIGHUP) {
      (void)d->reload();
    } else {
      d->beginStop();
    }
    return 0;
  }

  // The problems that kept the new settings out; empty when they are in force.
  std::vector<std::string> reload() {
    // Before READY=1 (coldplug under way) there is no reload to announce: the new settings are
    // simply what the next batch uses.
    if (ready_) sd_notify(0, "RELOADING=1");
    std::vector<std::string> problems;
    auto loaded = loadSettings(paths_.root, paths_.configFile, log_, problems);
    if (!loaded) {
      log_.write({Priority::Err,
                  std::string(msgid::kPoliciesRejected),
                  "reload refused: " + (problems.empty() ? std::string("?") : problems.front()) +
                      (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "") +
                      "; the last good configuration and policies stay in force",
                  {{"IOMMUD_PROBLEMS", std::to_string(problems.size())}}});
    } else {
      filter_.clearLeftAlone();
      const auto before = exportTargets();
      const auto& was = settings_.config;
      const bool remeasure = was.measure != loaded->config.measure ||
                             was.measureInterval != loaded->config.measureInterval ||
                             was.prometheus != loaded->config.prometheus;
      settings_ = std::move(*loaded);
      if (remeasure) startMeasuring();
      filter_.setDebounce(settings_.config.debounce);
      dropExports(before);
      log_.setMaxPriority(priorityOf(settings_.config.logLevel));
      log_.write({Priority::Info,
                  std::string(msgid::kPoliciesLoaded),
                  "reloaded: " + std::to_string(settings_.policies.policies.rules.size()) + " rules",
                  {}});
      // What the new policies want of devices already present, as at start (no disruption).
      coldplugQueued_ = true;
      startNext();
    }
    if (ready_) sd_notifyf(0, "READY=1\nSTATUS=%s", statusLine().c_str());
    if (service_) service_->propertiesChanged(bus::ManagerService::Properties::Daemon);  // Rules
    return problems;
  }

  // An export turned off (or moved) by a reload goes: what it says would grow stale.
  void dropExports(const ExportTargets& before) {
    for (const auto& was : droppedExports(before, exportTargets())) {
      if (unlink(was.c_str()) != 0 && errno != ENOENT) {
        log_.warning("fleet export: cannot remove " + was + ": " + std::strerror(errno) + ", ignoring");
      }
      exportErrors_.forget(was);
    }
  }

  void beginStop() {
    if (stopping_) return;
    stopping_ = true;
    sd_notify(0, "STOPPING=1");
    for (auto& [_, reply] : calls_) reply.replyError(bus::kErrorStopping, "iommud is stopping");
    calls_.clear();
    if (service_) service_->propertiesChanged(bus::ManagerService::Properties::Daemon);
    log_.write({Priority::Info,
                std::string(msgid::kStopping),
                working() ? "stopping after the change under way (" + describeBatch() + ")" : "stopping",
                {}});
    if (!working()) stop();
  }

  void stop() {
    if (settings_.config.revertOnStop) revertOnStop();
    sd_event_exit(event_, 0);
  }

  void revertOnStop() {
    ApplyContext ctx = context();
    auto host = adapters::sysfs::readHost(root_);
    if (!host) {
      log_.error("cannot revert on stop: " + host.error().describe());
      return;
    }
    for (const auto& o : revertChanges(std::nullopt, *host, ctx)) {
      auto e = journalEntry(o, *host);
      if (o.result == OutcomeKind::Done) e.messageId = std::string(msgid::kReverted);
      log_.write(e);
      if (auto counter = counterKey(o, true)) counters_.add(*counter);
    }
    // What the exports say outlives the daemon: say what the revert left.
    if (!exportTargets().any()) return;
    auto after = adapters::sysfs::readHost(root_);
    if (!after) return;
    for (const auto& r :
         writeExports(exportTargets(), buildStatus(std::move(after).value()), counters_, std::time(nullptr))) {
      exported(r.path, r.error);
    }
  }

  DaemonPaths paths_;
  sd::Log log_;
  Settings settings_;
  adapters::sysfs::Root root_{paths_.root};
  adapters::sysfs::RootWriter writer_{root_};
  std::optional<WriterSession> session_;
  std::optional<adapters::udev::Monitor> monitor_;

  sd_event* event_ = nullptr;
  sd_event_source* monitorSource_ = nullptr;
  std::vector<sd_event_source*> signalSources_;
  HotplugFilter filter_{settings_.config.debounce};
  sd_event_source* debounceTimer_ = nullptr;  // at filter_.nextDeadline()
  bool coldplugQueued_ = false;

  std::optional<sd::WorkerProcess> worker_;  // one at a time
  Work childWork_;
  std::optional<bus::PendingCall> childCall_;  // the D-Bus call the worker answers

  std::unique_ptr<bus::ManagerService> service_;  // nullptr: no system bus, or a synthetic root
  std::deque<std::pair<Call, bus::PendingCall>> calls_;
  BusView busView_;
  // [measure]: this daemon's tracefs instance, and the timer that exports its counters.
  static constexpr uint64_t kMeasureAccuracyUsec = 100'000;
  std::optional<adapters::trace::DmaCounters> dma_;
  sd::EventSource measureTimer_;
  bool viewStale_ = false;  // the host changed since the properties and the exports last read it
  Counters counters_;       // what the workers did, for the Prometheus export
  ExportErrors exportErrors_;
  std::string startedAt_ = utcNow();
  std::string lastRunAt_;

  std::map<std::string, Tally> tallies_;         // address -> what the policies did to it
  std::map<std::string, std::string> departed_;  // identity of a tuned device that went -> its address
  bool ready_ = false;
  bool stopping_ = false;
  bool failed_ = false;
  DaemonOptions options_;  // --once: no loop, no child; --early: the boot pass
};

}  // namespace

int runDaemon(const DaemonPaths& paths, const DaemonOptions& options, const sd::Log& log) {
  std::vector<std::string> problems;
  auto settings = loadSettings(paths.root, paths.configFile, log, problems);
  if (!settings) {
    log.write({Priority::Err,
               std::string(msgid::kPoliciesRejected),
               std::string(options.early ? "not applying the boot rules" : "not starting") +
                   ": the configuration or the policies are not valid (see above; `iommuctl check`)",
               {}});
    return kExitConfig;
  }
  sd::Log ours = log;
  ours.setMaxPriority(priorityOf(settings->config.logLevel));
  const auto& rules = settings->policies.policies.rules;
  log.write(
      {Priority::Info, std::string(msgid::kPoliciesLoaded), "loaded " + std::to_string(rules.size()) + " rules", {}});
  // At boot, a policy set without boot rules costs nothing: no lock, no reading of the host.
  if (options.early && std::none_of(rules.begin(), rules.end(),
                                    [](const core::Rule& r) { return r.enabled && r.when == core::When::Boot; })) {
    ours.info("no rule has when = \"boot\": nothing to do at boot");
    return 0;
  }
  Daemon daemon(paths, ours, std::move(*settings), options);
  return options.once ? daemon.once() : daemon.run();
}

}  // namespace iommud::app
