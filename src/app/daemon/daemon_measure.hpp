#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "adapters/systemd/event_loop.hpp"
#include "adapters/systemd/log.hpp"
#include "adapters/trace/tracefs.hpp"
#include "app/daemon/dma_watch.hpp"
#include "app/measure/effect_watch.hpp"
#include "app/worker/worker_report.hpp"
#include "config/daemon_config.hpp"
#include "core/measured_effect.hpp"

namespace iommud::app {

/// [measure] in the daemon (docs/measure.md "In the daemon"): its own tracefs instance, which the
/// worker reads for each view of the host; a timer that asks for a fresh view every interval, so
/// that the exported counters move; and, with effect-window, a reading every second and the
/// windows before and after each piece of work that changed devices (EffectWatch decides), logged
/// here (MESSAGE_ID kMeasured) and handed on for D-Bus. And, while anyone watches over D-Bus
/// (WatchDma), the rates of every device each second, from the same instance or, when [measure]
/// keeps none, one opened for the watch and removed when the last watcher leaves.
class DaemonMeasuring {
 public:
  struct Hooks {
    std::function<void()> viewDue;                        // the Prometheus export's interval passed
    std::function<void(const EffectMeasured&)> measured;  // a change's after-window ended (logged)
    std::function<void(const core::DmaInterval&)> rates;  // a second of live DMA, for the watchers
  };
  DaemonMeasuring(adapters::systemd::EventLoop& loop, const adapters::systemd::Log& log,
                  const adapters::sysfs::Root& root, Hooks hooks)
      : loop_(loop), log_(log), root_(root), hooks_(std::move(hooks)) {}

  /// Starts with these settings, after dropping what ran before (its instance is removed): a
  /// reload that changed them counts afresh.
  void restart(const config::DaemonConfig& c);

  /// The instance, or none when not measuring; the worker holds a reference to this.
  [[nodiscard]] const std::optional<adapters::trace::DmaCounters>& counters() const { return dma_; }

  /// A piece of work starts and ends: the readings that close the before-window and open the
  /// after-window of what it changed (work that cannot change devices is not measured).
  void workStarting(const WorkerRequest& work);
  void workEnded(const WorkerRequest& work, std::vector<core::EffectSubject> changed);

  /// WatchDma from `who`: why the daemon cannot measure (the words of `iommuctl top`), or nothing
  /// when it watches. UnwatchDma, or `who` left the bus.
  std::optional<std::string> watch(const std::string& who);
  void unwatch(const std::string& who);

 private:
  void startConfigured(const config::DaemonConfig& c);
  void startEffects(const config::DaemonConfig& c);
  std::optional<core::DmaReading> read(const adapters::trace::DmaCounters& counters);
  std::optional<core::DmaReading> read() { return read(*dma_); }
  void sampled();
  // The live rates: started with the first watcher (or again after a restart), stopped with the last.
  std::optional<std::string> startRates();
  void stopRates();
  void ratesDue();

  adapters::systemd::EventLoop& loop_;
  const adapters::systemd::Log& log_;
  const adapters::sysfs::Root& root_;
  Hooks hooks_;
  std::optional<adapters::trace::DmaCounters> dma_;
  adapters::systemd::Timer viewTimer_;
  std::optional<EffectWatch> effects_;
  adapters::systemd::Timer effectTimer_;
  DmaWatchers watchers_;
  std::optional<adapters::trace::DmaCounters> watchDma_;  // the watch's own, when dma_ is none
  adapters::systemd::Timer rateTimer_;
  std::optional<core::DmaReading>
      lastRates_;  // the reading the next interval starts from; none: not measuring for watchers
  double lastRatesAt_ = 0;
};

}  // namespace iommud::app
