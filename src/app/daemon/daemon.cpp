#include "app/daemon/daemon.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <utility>

#include "adapters/dbus/manager_service.hpp"
#include "adapters/systemd/event_loop.hpp"
#include "adapters/systemd/notify.hpp"
#include "app/change/message_ids.hpp"
#include "app/change/planning.hpp"
#include "app/change/reconcile.hpp"
#include "app/daemon/bus_link.hpp"
#include "app/daemon/bus_view.hpp"
#include "app/daemon/daemon_exports.hpp"
#include "app/daemon/daemon_measure.hpp"
#include "app/daemon/device_tallies.hpp"
#include "app/daemon/hotplug_filter.hpp"
#include "app/daemon/hotplug_watch.hpp"
#include "app/daemon/work_queue.hpp"
#include "app/daemon/worker_supervisor.hpp"
#include "app/measure/effect_watch.hpp"
#include "app/worker/daemon_work.hpp"
#include "app/worker/worker_report.hpp"
#include "config/daemon_config.hpp"
#include "support/utc_time.hpp"

namespace iommud::app {

namespace sd = adapters::systemd;
namespace bus = adapters::dbus;
using Clock = std::chrono::steady_clock;
using Priority = sd::Priority;

DaemonPaths daemonPathsFromEnvironment() {
  DaemonPaths p;
  if (auto d = directoryFromEnvironment("CONFIGURATION_DIRECTORY")) p.configFile = *d + "/iommud.conf";
  p.state = statePathsFromEnvironment("");
  return p;
}

namespace {

// How long a start waits for another writer to let go of the lock: far more than an apply takes
// (an `iommuctl apply --measure` of a minute is long); past it the start fails, naming the holder.
constexpr std::chrono::milliseconds kLockWait{300'000};

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

using Call = WorkerCall;
using Work = WorkerRequest;
using WorkKind = WorkerRequest::Kind;

class Daemon {
 public:
  Daemon(sd::EventLoop loop, DaemonPaths paths, const sd::Log& log, Settings settings, DaemonOptions options)
      : loop_(std::move(loop)),
        paths_(std::move(paths)),
        log_(log),
        settings_(std::move(settings)),
        options_(options) {}
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  ~Daemon() {
    (void)queue_.dropCalls();  // their callers hear that they were dropped, while the bus is there
    worker_.reset();           // the same for its call; waits for the worker to end
    service_.reset();
  }

  int once() {
    if (!begin()) return 1;
    WorkerReport report;
    if (!work_.reconcileBatch(Work{}, report)) return 1;
    absorb(report.devices, true, tallies_, filter_);
    log_.info(statusLine());
    return tallies_.anyFailed() ? 1 : 0;
  }

  int run() {
    // Watched (so blocked) before the lock and the recovery: a stop waits for them.
    if (!watch(signals_, loop_.signals({SIGTERM, SIGINT, SIGHUP}, [this](int s) { signalled(s); }))) return 1;
    if (!begin()) return 1;
    startWorker();
    measuring_.restart(settings_.config);
    if (auto started = hotplug_.start(loop_); !started) return fatal(started.error().describe());
    loop_.watchdog();                      // WATCHDOG=1 at half of $WATCHDOG_USEC when the service manager asks for it
    if (paths_.root == "/") connectBus();  // a synthetic root is no host to answer for on the bus
    // What is there now is no hotplug, whatever udev replays of it later.
    if (auto present = root_.listDir("/sys/bus/pci/devices")) filter_.present(*present);
    queue_.wholeHost();
    startNext();
    int r = loop_.run();
    if (r < 0) return fatal(std::string("the event loop failed: ") + std::strerror(-r));
    return r;
  }

 private:
  int fatal(const std::string& what) {
    log_.error(what);
    return 1;
  }

  // An owner of something the loop waits for, made or said why not.
  template <class Owner>
  bool watch(Owner& owner, core::Result<Owner> made) {
    if (!made) {
      log_.error(made.error().describe());
      return false;
    }
    owner = std::move(made).value();
    return true;
  }

  // Lock and recovery: what every writer does first.
  bool begin() {
    ApplyContext ctx = context();
    // A writer still at work (iommuctl apply, the early-boot pass's child past its limit) holds the
    // lock: wait for it, saying who it is, rather than exit and be restarted while it works. The
    // start's own timeout is extended to cover the wait.
    LockWait wait;
    if (!options_.once) {
      wait.bound = kLockWait;
      wait.waiting = [this](const std::string& holder) {
        const std::string what = "waiting for the writer lock, held by " + holder;
        log_.warning(what + " (at most " + std::to_string(kLockWait.count() / 1000) + " s)");
        sd::notify(
            "STATUS=" + what + "\nEXTEND_TIMEOUT_USEC=" +
            std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(kLockWait).count() + 30'000'000));
      };
    }
    auto session = beginWriting(ctx, wait);
    if (!session) {
      log_.error(session.error().describe());
      return false;
    }
    for (const auto& r : session->recovered.recovered) {
      work_.logRecovery(r);
      for (const auto& a : r.rebound) filter_.rebound(a);
    }
    // Not fatal (a restart would only loop): the start goes on, degraded, and STATUS= says so.
    for (const auto& p : session->recovered.problems) log_.error(p);
    degraded_ = session->degraded();
    if (!degraded_.empty()) log_.warning("degraded: " + degraded_);
    session_.emplace(std::move(session).value());
    return true;
  }

  ApplyContext context() { return ApplyContext{root_, writer_, nullptr, paths_.state, support::utcNow, {}}; }

  // Whether anyone wants a view of the host after it may have changed: the D-Bus properties, the
  // fleet exports.
  [[nodiscard]] bool wantsView() const { return service_ || exports_.targets().any(); }

  // What a piece of work said, beyond the tallies: RecentActions, the counters, the exports, the
  // D-Bus view and its signals.
  void report(const Work& work, const WorkerReport& r) {
    const bool plan = work.kind == WorkKind::Call && work.call.kind == Call::Kind::Plan;
    const bool view = work.kind == WorkKind::View;
    if (!plan && !view) lastRunAt_ = support::utcNow();
    busView_.acted(r.actions);
    counters_ += r.counters;
    for (const auto& e : r.exports) exports_.written(e.path, e.error);
    // A view read before a device went would show it again: the view queued by its removal follows.
    const bool viewFresh = r.host && filter_.removedMeanwhile().empty();
    if (viewFresh) queue_.viewFresh();
    if (viewFresh && busView_.take(*r.host) && service_) {
      service_->propertiesChanged(bus::ManagerService::Properties::Host);
    }
    if (!wantsView() || view || plan) return;
    if (!r.host) queue_.viewStale();
    if (!service_) return;
    if (!r.actions.empty()) service_->acted(triggerName(work), r.actions);
    service_->propertiesChanged(bus::ManagerService::Properties::Daemon);
  }

  [[nodiscard]] std::string statusLine() const {
    return degraded_.empty() ? tallies_.statusLine() : "degraded: " + degraded_ + "; " + tallies_.statusLine();
  }

  HotplugWatch::Hooks hotplugHooks() {
    return {.gone = [this](const std::string& a) { forget(a); },
            .due = [this] { startNext(); },
            .wholeHost = [this] { queue_.wholeHost(); }};
  }

  DaemonMeasuring::Hooks measuringHooks() {
    return {[this] {
              queue_.viewStale();
              startNext();
            },
            [this](const EffectMeasured& c) {
              if (service_) service_->measured(effectViews(c), c.hostMapsBefore, c.hostMapsAfter);
            },
            [this](const core::DmaInterval& i) {
              if (service_) service_->dmaRates(i.seconds, i.mapsAttributed, dmaRateViews(i, busView_.host()));
            }};
  }

  // --- the worker --------------------------------------------------------------------------------

  // The worker that stays, forked at the first work (after the lock and the recovery).
  void startWorker() {
    worker_.emplace(loop_, log_, queue_,
                    WorkerSupervisor::Hooks{.atStart = [this] { leaveTheLoop(); },
                                            .run = [this](const Work& w) { return work_.run(w); },
                                            .ended = [this](const Work& w, const WorkerReport& r) { finished(w, r); },
                                            .free =
                                                [this] {
                                                  filter_.workerDone();
                                                  startNext();
                                                }});
  }

  // In the worker, once: what only the daemon's loop talks to is not the worker's to keep open
  // (a bus connection the daemon drops must go, not linger in its worker).
  void leaveTheLoop() {
    hotplug_.closeInChild();
    if (service_) service_->closeInChild();
  }

  // The next work, most urgent first: the recovery after a worker died, the work it died in, the
  // whole host (start, reload), devices that appeared or changed, D-Bus calls in their order, then
  // a fresh view of the host for the properties.
  void startNext() {
    if (working()) return;
    auto next = queue_.next(filter_, wantsView(), stopping_);
    if (!next) return;
    Work work = std::move(next->work);
    work.wantsView = wantsView();
    work.busView = service_ != nullptr;
    work.counters = counters_;
    work.departed = tallies_.departed();
    measuring_.workStarting(work);
    filter_.workerStarted();
    if (!worker_->start(std::move(work), std::move(next->reply))) filter_.workerDone();  // dropped
  }

  [[nodiscard]] bool working() const { return worker_ && worker_->busy(); }

  // What a piece of work said, taken in; the next one is started.
  void finished(const Work& work, const WorkerReport& news) {
    filter_.workerDone();
    const bool batch = work.kind == WorkKind::Batch;
    const bool wholeHost =
        (batch && work.batch.whole()) ||
        (work.kind == WorkKind::Call && work.call.kind == Call::Kind::Apply && work.call.device.empty());
    measuring_.workEnded(work, news.changed);
    if (batch && !news.complete) {
      absorbCutShort(devicesOf(work.batch), wholeHost, tallies_, filter_);
    } else {
      absorb(news.devices, wholeHost, tallies_, filter_);
    }
    // The worker read the host before these went: they are gone, whatever it said of them.
    for (const auto& a : filter_.removedMeanwhile()) forget(a);
    report(work, news);
    // The events a failed change's rollback caused while the worker ran are no new plug.
    filter_.dropLeftAlonePending();
    hotplug_.armDebounce();
    auto now = Clock::now();
    for (const auto& a : devicesOf(work.batch)) {
      if (auto took = filter_.reacted(a, now)) {
        // IOMMUD_HANDLED: what tests wait for to know that the device's events so far are handled.
        log_.write({Priority::Debug,
                    "",
                    "reacted to " + a + " in " + std::to_string(took->count()) + " ms",
                    {{"IOMMUD_HANDLED", a}}});
      }
    }
    const bool coldplug = batch && work.batch.whole();
    if (coldplug && !ready_) {
      ready_ = true;
      log_.write({Priority::Info, std::string(msgid::kStarted), "iommud started: " + statusLine(), {}});
      sd::notify("READY=1\nSTATUS=" + statusLine());
    } else {
      sd::notify("STATUS=" + statusLine());
    }
    if (service_ && coldplug) service_->propertiesChanged(bus::ManagerService::Properties::Daemon);  // State
    if (stopping_ && !queue_.recovering()) {
      stop();
      return;
    }
    startNext();
  }

  // --- D-Bus -------------------------------------------------------------------------------------

  void connectBus() {
    service_ = serveOnBus(loop_, log_,
                          {.call = [this](Call call, bus::PendingCall reply,
                                          uint32_t caller) { enqueue(std::move(call), std::move(reply), caller); },
                           .reload = [this] { return reload(); },
                           .host = [this]() -> const bus::HostSummary& { return busView_.host(); },
                           .daemon = [this] { return daemonSummary(); },
                           .watchDma = [this](const std::string& who) { return measuring_.watch(who); },
                           .unwatchDma = [this](const std::string& who) { measuring_.unwatch(who); }});
  }

  // A D-Bus call waits for the worker like any batch (WorkQueue bounds how many).

  void enqueue(Call call, bus::PendingCall reply, uint32_t caller) {
    if (stopping_) {
      reply.replyError(bus::kErrorStopping, "iommud is stopping");
      return;
    }
    if (auto refused = queue_.refused(call, caller)) {
      reply.replyError(bus::kErrorFailed, *refused);
      return;
    }
    queue_.call(std::move(call), std::move(reply), caller);
    startNext();
  }

  bus::DaemonSummary daemonSummary() const {
    return {stopping_ ? "stopping" : (ready_ ? "running" : "starting"),      statusLine(),     startedAt_, lastRunAt_,
            static_cast<uint32_t>(settings_.policies.policies.rules.size()), busView_.recent()};
  }

  // --- events ------------------------------------------------------------------------------------

  // What the daemon knew of a device that went; it is remembered only by identity, if it was tuned.
  void forget(const std::string& address) {
    hotplug_.armDebounce();
    queue_.viewStale();
    if (tallies_.removed(address)) sd::notify("STATUS=" + statusLine());
  }

  void signalled(int signo) {
    if (signo == SIGHUP) {
      (void)reload();
    } else {
      beginStop();
    }
  }

  // The problems that kept the new settings out; empty when they are in force.
  std::vector<std::string> reload() {
    // Before READY=1 (coldplug under way) there is no reload to announce: the new settings are
    // simply what the next batch uses.
    if (ready_) sd::notify("RELOADING=1");
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
      const auto before = exports_.targets();
      const auto& was = settings_.config;
      const bool remeasure =
          was.measure != loaded->config.measure || was.measureInterval != loaded->config.measureInterval ||
          was.effectWindow != loaded->config.effectWindow || was.prometheus != loaded->config.prometheus;
      settings_ = std::move(*loaded);
      if (worker_) worker_->retireBeforeNext();
      if (remeasure) measuring_.restart(settings_.config);
      filter_.setDebounce(settings_.config.debounce);
      exports_.reloaded(before);
      log_.setMaxPriority(priorityOf(settings_.config.logLevel));
      log_.write({Priority::Info,
                  std::string(msgid::kPoliciesLoaded),
                  "reloaded: " + std::to_string(settings_.policies.policies.rules.size()) + " rules",
                  {}});
      // What the new policies want of devices already present, as at start (no disruption).
      queue_.wholeHost();
      startNext();
    }
    if (ready_) sd::notify("READY=1\nSTATUS=" + statusLine());
    if (service_) service_->propertiesChanged(bus::ManagerService::Properties::Daemon);  // Rules
    return problems;
  }

  void beginStop() {
    if (stopping_) return;
    stopping_ = true;
    hotplug_.stopping();
    sd::notify("STOPPING=1");
    for (auto& reply : queue_.dropCalls()) reply.replyError(bus::kErrorStopping, "iommud is stopping");
    if (service_) service_->propertiesChanged(bus::ManagerService::Properties::Daemon);
    log_.write({Priority::Info,
                std::string(msgid::kStopping),
                working() ? "stopping after the change under way (" + describe(worker_->current()) + ")" : "stopping",
                {}});
    if (!working()) stop();
  }

  void stop() {
    if (settings_.config.revertOnStop && settings_.config.adviseOnly) {
      log_.notice("not reverting at stop: advise-only = true changes nothing (iommuctl revert does it)");
    } else if (settings_.config.revertOnStop) {
      for (const auto& r : work_.revertAtStop(counters_)) exports_.written(r.path, r.error);
    }
    loop_.exit(0);
  }

  sd::EventLoop loop_;
  DaemonPaths paths_;
  sd::Log log_;
  Settings settings_;
  DaemonOptions options_;  // --once: no loop, no child; --early: the boot pass
  adapters::sysfs::Root root_{paths_.root};
  adapters::sysfs::RootWriter writer_{root_};
  std::optional<WriterSession> session_;

  sd::Watch signals_;
  HotplugFilter filter_{settings_.config.debounce};
  HotplugWatch hotplug_{root_, filter_, log_, hotplugHooks()};

  std::optional<WorkerSupervisor> worker_;  // one piece of work at a time

  std::unique_ptr<bus::ManagerService> service_;  // nullptr: no system bus, or a synthetic root
  WorkQueue<bus::PendingCall> queue_;             // what the worker does next
  BusView busView_;
  DaemonMeasuring measuring_{loop_, log_, root_, measuringHooks()};
  DaemonWork work_{root_,          writer_, paths_.state,         settings_.config, settings_.policies.policies,
                   options_.early, log_,    measuring_.counters()};
  Counters counters_;  // what the workers did, for the Prometheus export
  DaemonExports exports_{settings_.config, log_};
  std::string startedAt_ = support::utcNow();
  std::string lastRunAt_;

  DeviceTallies tallies_;
  bool ready_ = false;
  std::string degraded_;  // what recovery left unresolved at the start ("1 device left unbound: ...")
  bool stopping_ = false;
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
  auto loop = sd::EventLoop::create();
  if (!loop) {
    ours.error(loop.error().describe());
    return 1;
  }
  Daemon daemon(std::move(loop).value(), paths, ours, std::move(*settings), options);
  return options.once ? daemon.once() : daemon.run();
}

}  // namespace iommud::app
