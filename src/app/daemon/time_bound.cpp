#include "app/daemon/time_bound.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

namespace iommud::app {

namespace {

using Clock = std::chrono::steady_clock;

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The child's exit code, or nullopt when it is still running at `deadline`. A pidfd (Linux 5.3)
// turns the wait into one poll; without it, waitpid is polled every 20 ms.
std::optional<int> waitUntil(pid_t child, Clock::time_point deadline) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) {
      if (pidfd >= 0) ::close(pidfd);
      return exitCodeOf(status);
    }
    if (r < 0 && errno != EINTR) {
      if (pidfd >= 0) ::close(pidfd);
      return 1;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(20)));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return std::nullopt;
}

}  // namespace

int runWithin(std::chrono::milliseconds limit, const std::function<int()>& work, const adapters::systemd::Log& log) {
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child < 0) {
    log.warning(std::string("cannot start a worker: ") + std::strerror(errno) + "; working without a time limit");
    return work();
  }
  if (child == 0) {
    int code = 1;
    try {
      code = work();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "iommud: internal error: %s\n", e.what());
      code = 70;  // EX_SOFTWARE
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  if (auto code = waitUntil(child, Clock::now() + limit)) return *code;
  log.warning("still working after " + std::to_string(limit.count() / 1000) + " s; not waiting any longer (process " +
              std::to_string(child) + " goes on; a device it has not reached keeps its translated type)");
  return kExitStillRunning;
}

}  // namespace iommud::app
