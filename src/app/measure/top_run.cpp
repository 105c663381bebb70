#include "app/measure/top_run.hpp"

#include <poll.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <optional>

#include "adapters/sysfs/host_reader.hpp"
#include "adapters/trace/tracefs.hpp"
#include "app/report/top.hpp"
#include "core/text.hpp"

namespace iommud::app {

namespace {

using Clock = std::chrono::steady_clock;

// Intervals between two full reads of the host when no PCI function came or went.
constexpr int kRereadEvery = 10;

/// The signals that end top: blocked and read from a signalfd, so that they end the loop (and the
/// instance is removed) instead of the process. The old mask comes back on destruction.
class SignalSink {
 public:
  SignalSink() {
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set_, sig);
    sigprocmask(SIG_BLOCK, &set_, &old_);
    fd_ = signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  SignalSink(const SignalSink&) = delete;
  SignalSink& operator=(const SignalSink&) = delete;
  ~SignalSink() {
    if (fd_ >= 0) ::close(fd_);
    sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  [[nodiscard]] int fd() const { return fd_; }
  /// The signal that arrived, or 0.
  [[nodiscard]] int take() const {
    signalfd_siginfo info{};
    return ::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info) ? static_cast<int>(info.ssi_signo) : 0;
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
  int fd_ = -1;
};

/// The terminal without line buffering and echo while top runs, so that a key acts at once.
class RawTerminal {
 public:
  RawTerminal() {
    if (::tcgetattr(STDIN_FILENO, &old_) != 0) return;
    termios raw = old_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  ~RawTerminal() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &old_);
  }

 private:
  termios old_{};
  bool active_ = false;
};

enum class Wake { Deadline, Quit, Key };

struct Waited {
  Wake wake = Wake::Deadline;
  int signal = 0;
  char key = 0;
};

// Waits until `deadline` for a signal or (when `keys`) a key press.
Waited waitUntil(Clock::time_point deadline, const SignalSink& signals, bool keys) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return {};
    std::array<pollfd, 2> fds{{{signals.fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}}};
    int n = ::poll(fds.data(), keys ? 2 : 1, static_cast<int>(left));
    if (n < 0 && errno != EINTR) return {};
    if (n <= 0) continue;
    if ((fds[0].revents & POLLIN) != 0) return {Wake::Quit, signals.take(), 0};
    if (keys && (fds[1].revents & (POLLIN | POLLHUP)) != 0) {
      char c = 0;
      if (::read(STDIN_FILENO, &c, 1) != 1) return {Wake::Quit, 0, 0};  // end of input
      return {Wake::Key, 0, c};
    }
  }
}

}  // namespace

std::string whyNotMeasuring(std::string_view who, const core::Error& e) {
  if (e.code == EACCES || e.code == EPERM) {
    return std::string(who) + " needs root (or CAP_PERFMON and write access to tracefs): " + e.describe();
  }
  return "cannot measure: " + e.describe();
}

int runTop(const adapters::sysfs::Root& root, const TopOptions& options) {
  SignalSink signals;
  auto counters = adapters::trace::DmaCounters::open(root);
  if (!counters) {
    std::fprintf(stderr, "iommuctl: %s\n", whyNotMeasuring("top", counters.error()).c_str());
    return 1;
  }
  for (const auto& name : counters->sweep().removed) {
    std::fprintf(stderr, "iommuctl: removed tracing instance %s, left by a process that is gone\n", name.c_str());
  }
  for (const auto& e : counters->sweep().failures) {
    std::fprintf(stderr, "iommuctl: cannot remove a stale tracing instance: %s, ignoring\n", e.describe().c_str());
  }
  TopView view;
  view.kernel = std::string(core::trim(root.readFile("/proc/sys/kernel/osrelease").valueOr(std::string())));
  view.absent = counters->absent();

  bool interactive = !options.once && !options.json && ::isatty(STDIN_FILENO) == 1 && ::isatty(STDOUT_FILENO) == 1;
  std::optional<RawTerminal> raw;
  if (interactive) raw.emplace();
  core::DmaSortKey sort = options.sort;
  auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));

  auto before = counters->read();
  auto t0 = Clock::now();
  // A single interval of N seconds looks like a hang without a word; scripts wait for this line.
  if (options.once && before) std::fprintf(stderr, "iommuctl: counting for %g s\n", options.seconds);
  int code = 0;
  bool shown = false;
  std::optional<core::HostFacts> host;
  std::vector<std::string> lastFunctions;
  int sinceRead = 0;
  auto show = [&] {
    if (options.json) {
      std::fputs(topJson(view).c_str(), stdout);
    } else {
      if (interactive) std::fputs("\033[H\033[2J", stdout);
      std::fputs(topTable(view, sort, options.color, options.all, options.width).c_str(), stdout);
      if (interactive)
        std::fputs("keys: m maps, b MiB/s, s mean size, o bounces, f faults, d device, q quit\n", stdout);
    }
    std::fflush(stdout);
  };
  while (before) {
    Waited w = waitUntil(t0 + period, signals, interactive);
    // With --once, SIGINT (Ctrl-C) ends the interval early and prints it, as perf stat does.
    bool endsInterval = options.once && w.wake == Wake::Quit && w.signal == SIGINT;
    if (w.wake == Wake::Quit && !endsInterval) {
      code = w.signal != 0 ? 128 + w.signal : 0;
      break;
    }
    if (w.wake == Wake::Key) {
      if (w.key == 'q') break;
      if (auto key = sortKeyFor(w.key)) {
        sort = *key;
        if (shown) show();
      }
      continue;
    }
    auto after = counters->read();
    auto t1 = Clock::now();
    if (!after) {
      before = after;
      break;
    }
    // The host again when its PCI functions changed (a device came or went), and every
    // kRereadEvery intervals for what a listing does not show (a group's type).
    auto functions = root.listDir("/sys/bus/pci/devices").valueOr(std::vector<std::string>{});
    if (!host || functions != lastFunctions || ++sinceRead >= kRereadEvery) {
      auto fresh = adapters::sysfs::readHost(root);
      if (!fresh) {
        std::fprintf(stderr, "iommuctl: cannot read the host: %s\n", fresh.error().describe().c_str());
        code = 1;
        break;
      }
      host = std::move(fresh).value();
      lastFunctions = std::move(functions);
      sinceRead = 0;
    }
    view.interval = core::diffReadings(*before, *after, std::chrono::duration<double>(t1 - t0).count());
    view.rows = core::dmaRows(view.interval, *host);
    if (!options.device.empty()) {
      std::erase_if(view.rows, [&](const core::DmaRow& r) { return r.dma.device != options.device; });
    }
    show();
    shown = true;
    if (options.once) break;
    before = std::move(after);
    t0 = t1;
  }
  if (!before) {
    std::fprintf(stderr, "iommuctl: cannot read the counters: %s\n", before.error().describe().c_str());
    code = 1;
  }
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
