#include "app/daemon/daemon_measure.hpp"

#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

#include "app/measure/top_run.hpp"
#include "support/utc_time.hpp"

namespace iommud::app {

namespace {

constexpr std::chrono::microseconds kAccuracy{100'000};
constexpr std::chrono::microseconds kEffectSample{1'000'000};
constexpr std::chrono::microseconds kRateInterval{1'000'000};

double monotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Batches and the calls that apply or revert; a plan, a view or a recovery is not a change.
bool mayChangeDevices(const WorkerRequest& w) {
  return w.kind == WorkerRequest::Kind::Batch ||
         (w.kind == WorkerRequest::Kind::Call && w.call.kind != WorkerCall::Kind::Plan);
}

}  // namespace

void DaemonMeasuring::restart(const config::DaemonConfig& c) {
  viewTimer_ = {};
  effectTimer_ = {};
  effects_.reset();
  stopRates();   // a process has one instance: the watch's own goes before dma_ may be made
  dma_.reset();  // removes the instance
  startConfigured(c);
  if (!watchers_.any()) return;
  // The watchers go on, counting afresh on whichever instance there now is.
  if (auto why = startRates()) log_.warning("the DMA watchers get no rates: " + *why);
}

void DaemonMeasuring::startConfigured(const config::DaemonConfig& c) {
  if (!c.measure || !root_.isLive()) return;
  if (!c.prometheus && c.effectWindow.count() == 0) {
    log_.notice(
        "[measure] is on, but its counters go to the Prometheus export, which is off, and effect-window is 0: "
        "not measuring");
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
  startEffects(c);
  if (!c.prometheus) return;
  log_.info("measuring DMA in tracing instance " + dma_->instance() + ", exported every " +
            std::to_string(c.measureInterval.count()) + " s");
  auto timer = loop_.timer([this] { hooks_.viewDue(); }, kAccuracy);
  if (!timer) {
    log_.error(timer.error().describe() + ": exporting only on changes");
    return;
  }
  viewTimer_ = std::move(timer).value();
  viewTimer_.every(c.measureInterval);
}

void DaemonMeasuring::startEffects(const config::DaemonConfig& c) {
  if (c.effectWindow.count() == 0) return;
  auto timer = loop_.timer([this] { sampled(); }, kAccuracy);
  if (!timer) {
    log_.error(timer.error().describe() + ": not measuring the effect of changes");
    return;
  }
  effects_.emplace(static_cast<double>(c.effectWindow.count()));
  log_.info("measuring the effect of each change in tracing instance " + dma_->instance() + ": " +
            std::to_string(c.effectWindow.count()) + " s before and after");
  effectTimer_ = std::move(timer).value();
  effectTimer_.every(kEffectSample);
}

// A reading of the instance: a few small tracefs files, read in the loop.
std::optional<core::DmaReading> DaemonMeasuring::read(const adapters::trace::DmaCounters& counters) {
  auto reading = counters.read();
  if (!reading) {
    log_.warning("cannot read the DMA counters: " + reading.error().describe());
    return std::nullopt;
  }
  return std::move(reading).value();
}

void DaemonMeasuring::workStarting(const WorkerRequest& work) {
  if (!effects_ || !mayChangeDevices(work)) return;
  if (auto r = read()) effects_->workStarting(monotonicSeconds(), std::move(*r));
}

void DaemonMeasuring::workEnded(const WorkerRequest& work, std::vector<core::EffectSubject> changed) {
  if (!effects_ || !mayChangeDevices(work)) return;
  if (auto r = read()) effects_->workEnded(monotonicSeconds(), std::move(*r), std::move(changed), support::utcNow());
}

// Every second: the changes whose after-window ended, then a reading for the next before-window.
void DaemonMeasuring::sampled() {
  auto reading = read();
  if (!reading) return;
  const double now = monotonicSeconds();
  for (const auto& change : effects_->finish(now, *reading, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)))) {
    for (const auto& e : change.effects) log_.write(journalEntry(e, change));
    hooks_.measured(change);
  }
  effects_->sample(now, std::move(*reading));
}

// IOMMUD_DMA_WATCHER: what tests wait for to know that a watcher's coming or going is taken in.
std::optional<std::string> DaemonMeasuring::watch(const std::string& who) {
  if (watchers_.join(who) == DmaWatchers::Turn::Start) {
    if (auto why = startRates()) {
      (void)watchers_.leave(who);
      return why;
    }
  }
  log_.write({adapters::systemd::Priority::Debug, "", "DMA watcher " + who + " joined", {{"IOMMUD_DMA_WATCHER", who}}});
  return std::nullopt;
}

void DaemonMeasuring::unwatch(const std::string& who) {
  const auto turn = watchers_.leave(who);
  log_.write({adapters::systemd::Priority::Debug, "", "DMA watcher " + who + " left", {{"IOMMUD_DMA_WATCHER", who}}});
  if (turn == DmaWatchers::Turn::Stop) stopRates();
}

std::optional<std::string> DaemonMeasuring::startRates() {
  if (!dma_) {
    auto counters = adapters::trace::DmaCounters::open(root_);
    if (!counters) return whyNotMeasuring("iommud", counters.error());
    for (const auto& name : counters->sweep().removed)
      log_.info("removed tracing instance " + name + ", left by a process that is gone");
    watchDma_.emplace(std::move(counters).value());
  }
  const auto& counters = dma_ ? *dma_ : *watchDma_;
  auto timer = loop_.timer([this] { ratesDue(); }, kAccuracy);
  auto first = counters.read();
  if (!timer || !first) {
    watchDma_.reset();
    return "cannot measure: " + (timer ? first.error() : timer.error()).describe();
  }
  lastRates_ = std::move(first).value();
  lastRatesAt_ = monotonicSeconds();
  rateTimer_ = std::move(timer).value();
  rateTimer_.every(kRateInterval);
  log_.info("measuring DMA for D-Bus watchers in tracing instance " + counters.instance());
  return std::nullopt;
}

void DaemonMeasuring::stopRates() {
  if (!lastRates_) return;  // not measuring for watchers
  rateTimer_ = {};
  lastRates_.reset();
  if (!watchDma_) {
    log_.info("DMA watch ended; tracing instance " + dma_->instance() + " stays for [measure]");
    return;
  }
  const std::string instance = watchDma_->instance();
  if (auto closed = watchDma_->close(); !closed) {
    log_.warning("DMA watch ended; cannot remove tracing instance " + instance + ": " + closed.error().describe());
  } else {
    log_.info("DMA watch ended: removed tracing instance " + instance);
  }
  watchDma_.reset();
}

// Every second while watched: the interval since the last reading, as `iommuctl top` computes it.
void DaemonMeasuring::ratesDue() {
  auto reading = read(dma_ ? *dma_ : *watchDma_);
  if (!reading) return;
  const double now = monotonicSeconds();
  hooks_.rates(core::diffReadings(*lastRates_, *reading, now - lastRatesAt_));
  lastRates_ = std::move(reading);
  lastRatesAt_ = now;
}

}  // namespace iommud::app
