#include "adapters/process/terminal.hpp"

#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace iommud::adapters::process {

SignalSink::SignalSink() {
  sigemptyset(&set_);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set_, sig);
  sigprocmask(SIG_BLOCK, &set_, &old_);
  fd_.reset(signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
}

SignalSink::~SignalSink() {
  fd_.reset();
  sigprocmask(SIG_SETMASK, &old_, nullptr);
}

int SignalSink::take() const {
  signalfd_siginfo info{};
  return ::read(fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info) ? static_cast<int>(info.ssi_signo)
                                                                                    : 0;
}

RawTerminal::RawTerminal() {
  if (::tcgetattr(STDIN_FILENO, &old_) != 0) return;
  termios raw = old_;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
}

RawTerminal::~RawTerminal() {
  if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &old_);
}

bool interactive() {
  return ::isatty(STDIN_FILENO) == 1 && ::isatty(STDOUT_FILENO) == 1;
}

Waited waitUntil(std::chrono::steady_clock::time_point deadline, const SignalSink& signals, bool keys) {
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
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

}  // namespace iommud::adapters::process
