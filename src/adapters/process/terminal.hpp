#pragma once

#include <termios.h>

#include <chrono>
#include <csignal>

#include "support/unique_fd.hpp"

// What an interactive command (iommuctl top) needs of its terminal and its signals.

namespace iommud::adapters::process {

/// The signals that end an interactive command (INT, TERM, HUP, QUIT): blocked and read from a
/// signalfd, so that they end its loop (and what it set up is undone) instead of the process. The
/// old mask comes back on destruction.
class SignalSink {
 public:
  SignalSink();
  SignalSink(const SignalSink&) = delete;
  SignalSink& operator=(const SignalSink&) = delete;
  ~SignalSink();
  [[nodiscard]] int fd() const { return fd_.get(); }
  /// The signal that arrived, or 0.
  [[nodiscard]] int take() const;

 private:
  sigset_t set_{};
  sigset_t old_{};
  support::UniqueFd fd_;
};

/// The terminal on stdin without line buffering and echo while it lives, so that a key acts at once.
class RawTerminal {
 public:
  RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  ~RawTerminal();

 private:
  termios old_{};
  bool active_ = false;
};

/// Whether stdin and stdout are both terminals: someone is there to press keys and see a table.
bool interactive();

enum class Wake { Deadline, Quit, Key };

struct Waited {
  Wake wake = Wake::Deadline;
  int signal = 0;
  char key = 0;
};

/// Waits until `deadline` for a signal or (when `keys`) a key press on stdin; the end of stdin is Quit.
Waited waitUntil(std::chrono::steady_clock::time_point deadline, const SignalSink& signals, bool keys);

}  // namespace iommud::adapters::process
