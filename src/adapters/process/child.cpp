#include "adapters/process/child.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <thread>

#include "support/unique_fd.hpp"

namespace iommud::adapters::process {

namespace {

using Clock = std::chrono::steady_clock;

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

core::Result<pid_t> forkRunning(const std::function<int()>& work) {
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return core::errnoError(errno, "");
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
  return child;
}

// A pidfd (Linux 5.3) turns the wait into one poll; without it, waitpid is polled every 20 ms.
std::optional<int> waitUntil(pid_t child, Clock::time_point deadline) {
  const support::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) return exitCodeOf(status);
    if (r < 0 && errno != EINTR) return 1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (pidfd) {
      pollfd p{pidfd.get(), POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(20)));
    }
  }
}

}  // namespace iommud::adapters::process
