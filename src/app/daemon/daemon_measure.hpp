#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "adapters/systemd/event_loop.hpp"
#include "adapters/systemd/log.hpp"
#include "adapters/trace/tracefs.hpp"
#include "app/measure/effect_watch.hpp"
#include "app/worker/worker_report.hpp"
#include "config/daemon_config.hpp"
#include "core/measured_effect.hpp"

namespace iommud::app {

/// [measure] in the daemon (docs/measure.md "In the daemon"): its own tracefs instance, which the
/// worker reads for each view of the host; a timer that asks for a fresh view every interval, so
/// that the exported counters move; and, with effect-window, a reading every second and the
/// windows before and after each piece of work that changed devices (EffectWatch decides), logged
/// here (MESSAGE_ID kMeasured) and handed on for D-Bus.
class DaemonMeasuring {
 public:
  struct Hooks {
    std::function<void()> viewDue;                        // the Prometheus export's interval passed
    std::function<void(const EffectMeasured&)> measured;  // a change's after-window ended (logged)
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

 private:
  void startEffects(const config::DaemonConfig& c);
  std::optional<core::DmaReading> read();
  void sampled();

  adapters::systemd::EventLoop& loop_;
  const adapters::systemd::Log& log_;
  const adapters::sysfs::Root& root_;
  Hooks hooks_;
  std::optional<adapters::trace::DmaCounters> dma_;
  adapters::systemd::Timer viewTimer_;
  std::optional<EffectWatch> effects_;
  adapters::systemd::Timer effectTimer_;
};

}  // namespace iommud::app
