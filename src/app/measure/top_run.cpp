#include "app/measure/top_run.hpp"

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <optional>

#include "adapters/process/terminal.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "adapters/trace/tracefs.hpp"
#include "app/report/top.hpp"
#include "core/text.hpp"

namespace iommud::app {

namespace {

using Clock = std::chrono::steady_clock;

// Intervals between two full reads of the host when no PCI function came or went.
constexpr int kRereadEvery = 10;

using adapters::process::RawTerminal;
using adapters::process::SignalSink;
using adapters::process::Waited;
using adapters::process::waitUntil;
using adapters::process::Wake;

}  // namespace

std::string whyNotMeasuring(std::string_view who, const core::Error& e) {
  if (e.code == EACCES || e.code == EPERM) {
    return std::string(who) + " needs root (or CAP_PERFMON and write access to tracefs): " + e.describe();
  }
  return "cannot measure: " + e.describe();
}

namespace {

// One run of `iommuctl top`: its counters, the host it joins them with, and the screen.
class TopLoop {
 public:
  TopLoop(const adapters::sysfs::Root& root, const TopOptions& options, adapters::trace::DmaCounters& counters,
          const SignalSink& signals)
      : root_(root),
        options_(options),
        counters_(counters),
        signals_(signals),
        interactive_(!options.once && !options.json && adapters::process::interactive()),
        sort_(options.sort) {
    view_.kernel = std::string(core::trim(root.readFile("/proc/sys/kernel/osrelease").valueOr(std::string())));
    view_.absent = counters.absent();
    if (interactive_) raw_.emplace();
  }

  // Shows each interval until the user, a signal or an error ends it; returns the exit code.
  int run() {
    auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.seconds));
    auto before = counters_.read();
    auto t0 = Clock::now();
    // A single interval of N seconds looks like a hang without a word; scripts wait for this line.
    if (options_.once && before) std::fprintf(stderr, "iommuctl: counting for %g s\n", options_.seconds);
    while (before) {
      Waited w = waitUntil(t0 + period, signals_, interactive_);
      if (auto code = ends(w)) return *code;
      if (w.wake == Wake::Key) continue;
      auto after = counters_.read();
      auto t1 = Clock::now();
      if (!after) {
        before = after;
        break;
      }
      if (!refreshHost()) return 1;
      show(core::diffReadings(*before, *after, std::chrono::duration<double>(t1 - t0).count()));
      if (options_.once) return 0;
      before = std::move(after);
      t0 = t1;
    }
    std::fprintf(stderr, "iommuctl: cannot read the counters: %s\n", before.error().describe().c_str());
    return 1;
  }

 private:
  // The exit code when the wait ended top; a key changes the order and shows the last interval again.
  std::optional<int> ends(const Waited& w) {
    // With --once, SIGINT (Ctrl-C) ends the interval early and prints it, as perf stat does.
    bool endsInterval = options_.once && w.wake == Wake::Quit && w.signal == SIGINT;
    if (w.wake == Wake::Quit && !endsInterval) return w.signal != 0 ? 128 + w.signal : 0;
    if (w.wake != Wake::Key) return std::nullopt;
    if (w.key == 'q') return 0;
    if (auto key = sortKeyFor(w.key)) {
      sort_ = *key;
      if (shown_) print();
    }
    return std::nullopt;
  }

  // The host again when its PCI functions changed (a device came or went), and every
  // kRereadEvery intervals for what a listing does not show (a group's type).
  bool refreshHost() {
    auto functions = root_.listDir("/sys/bus/pci/devices").valueOr(std::vector<std::string>{});
    if (host_ && functions == lastFunctions_ && ++sinceRead_ < kRereadEvery) return true;
    auto fresh = adapters::sysfs::readHost(root_);
    if (!fresh) {
      std::fprintf(stderr, "iommuctl: cannot read the host: %s\n", fresh.error().describe().c_str());
      return false;
    }
    host_ = std::move(fresh).value();
    lastFunctions_ = std::move(functions);
    sinceRead_ = 0;
    return true;
  }

  void show(core::DmaInterval interval) {
    view_.interval = std::move(interval);
    view_.rows = core::dmaRows(view_.interval, *host_);
    if (!options_.device.empty()) {
      std::erase_if(view_.rows, [&](const core::DmaRow& r) { return r.dma.device != options_.device; });
    }
    print();
    shown_ = true;
  }

  void print() const {
    if (options_.json) {
      std::fputs(topJson(view_).c_str(), stdout);
    } else {
      if (interactive_) std::fputs("\033[H\033[2J", stdout);
      std::fputs(topTable(view_, sort_, options_.color, options_.all, options_.width).c_str(), stdout);
      if (interactive_)
        std::fputs("keys: m maps, b MiB/s, s mean size, o bounces, f faults, d device, q quit\n", stdout);
    }
    std::fflush(stdout);
  }

  const adapters::sysfs::Root& root_;
  const TopOptions& options_;
  adapters::trace::DmaCounters& counters_;
  const SignalSink& signals_;
  bool interactive_;
  std::optional<RawTerminal> raw_;
  core::DmaSortKey sort_;
  TopView view_;
  bool shown_ = false;
  std::optional<core::HostFacts> host_;
  std::vector<std::string> lastFunctions_;
  int sinceRead_ = 0;
};

void reportSweep(const adapters::trace::DmaCounters& counters) {
  for (const auto& name : counters.sweep().removed) {
    std::fprintf(stderr, "iommuctl: removed tracing instance %s, left by a process that is gone\n", name.c_str());
  }
  for (const auto& e : counters.sweep().failures) {
    std::fprintf(stderr, "iommuctl: cannot remove a stale tracing instance: %s, ignoring\n", e.describe().c_str());
  }
}

}  // namespace

int runTop(const adapters::sysfs::Root& root, const TopOptions& options) {
  SignalSink signals;
  auto counters = adapters::trace::DmaCounters::open(root);
  if (!counters) {
    std::fprintf(stderr, "iommuctl: %s\n", whyNotMeasuring("top", counters.error()).c_str());
    return 1;
  }
  reportSweep(*counters);
  int code = TopLoop(root, options, *counters, signals).run();
  if (auto closed = counters->close(); !closed) {
    std::fprintf(stderr, "iommuctl: cannot remove tracing instance %s: %s\n", counters->instance().c_str(),
                 closed.error().describe().c_str());
    code = code == 0 ? 1 : code;
  }
  return code;
}

namespace {

// Counts for `seconds` between two readings; EINTR when a signal ends the wait.
core::Result<core::DmaInterval> countFor(const adapters::trace::DmaCounters& counters, double seconds,
                                         const SignalSink& signals) {
  auto before = counters.read();
  auto t0 = Clock::now();
  if (!before) return before.error();
  auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  Waited w = waitUntil(t0 + period, signals, false);
  if (w.wake == Wake::Quit) return core::Error{EINTR, "", "the measurement was interrupted"};
  auto after = counters.read();
  auto t1 = Clock::now();
  if (!after) return after.error();
  return core::diffReadings(*before, *after, std::chrono::duration<double>(t1 - t0).count());
}

core::DmaWindow windowOf(const core::DmaInterval& interval, const core::HostFacts& host) {
  core::DmaWindow window;
  window.seconds = interval.seconds;
  window.mapsAttributed = interval.mapsAttributed;
  window.hostMapsPerSecond = interval.hostMapsPerSecond;
  window.rows = core::dmaRows(interval, host);
  // The counting host is this one (tracefs is live only): its page size, not x86's 4096.
  window.pageBytes = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return window;
}

core::Result<adapters::trace::DmaCounters> openCounters(const adapters::sysfs::Root& root) {
  auto counters = adapters::trace::DmaCounters::open(root);
  if (!counters) return core::Error{counters.error().code, "", whyNotMeasuring("top", counters.error())};
  return counters;
}

}  // namespace

core::Result<core::DmaWindow> measureWindow(const adapters::sysfs::Root& root, double seconds,
                                            const core::HostFacts& host) {
  SignalSink signals;
  auto counters = openCounters(root);
  if (!counters) return counters.error();
  auto interval = countFor(*counters, seconds, signals);
  if (!interval) return interval.error();
  if (auto closed = counters->close(); !closed) return closed.error();
  return windowOf(*interval, host);
}

core::Result<MeasuredChange> measureAround(const adapters::sysfs::Root& root, double seconds,
                                           const core::HostFacts& host,
                                           const std::function<core::Result<core::HostFacts>()>& change) {
  SignalSink signals;
  auto counters = openCounters(root);
  if (!counters) return counters.error();
  auto before = countFor(*counters, seconds, signals);
  if (!before) return before.error();
  auto after = change();
  if (!after) return after.error();
  auto interval = countFor(*counters, seconds, signals);
  if (!interval) return interval.error();
  if (auto closed = counters->close(); !closed) return closed.error();
  return MeasuredChange{windowOf(*before, host), windowOf(*interval, *after)};
}

}  // namespace iommud::app
