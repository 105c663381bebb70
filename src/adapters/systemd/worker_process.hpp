#pragma once

#include <sys/types.h>

#include <csignal>
#include <functional>
#include <memory>
#include <string>

#include "core/result.hpp"

struct sd_event;
struct sd_event_source;

namespace iommud::adapters::systemd {

/// An sd-event source, unreferenced (and so gone from its loop) with its owner.
struct EventSourceUnref {
  void operator()(sd_event_source* s) const;
};
using EventSource = std::unique_ptr<sd_event_source, EventSourceUnref>;

/// A file descriptor, closed with its owner.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  [[nodiscard]] int get() const { return fd_; }
  int release();

 private:
  int fd_ = -1;
};

/// One forked worker at a time on an sd-event loop (fork, no exec): what the child writes is read
/// from a pipe as it comes, so the loop never waits on it, and its end is reported once, with all
/// it wrote. SIGCHLD must be blocked (sd_event_add_child).
class WorkerProcess {
 public:
  struct Exit {
    bool exited = false;  // false: killed by a signal
    int status = 0;       // the exit code, or the signal
    std::string output;   // all the child wrote
  };
  /// What the child's work gives: the bytes for the parent and the exit code.
  struct Result {
    std::string output;
    int code = 0;
  };

  WorkerProcess(sd_event* event, std::function<void(Exit)> onExit) : event_(event), onExit_(std::move(onExit)) {}
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  ~WorkerProcess() = default;

  [[nodiscard]] bool running() const { return pid_ > 0; }

  /// Forks a child that runs `work`, writes its output and exits with its code. An error (no
  /// pipe, no fork) leaves no child. When the loop cannot watch the child (out of memory), this
  /// waits for it and reports its end before returning.
  core::Result<core::Done> start(const std::function<Result()>& work);

 private:
  static int onPipe(sd_event_source* s, int fd, uint32_t revents, void* self);
  static int onChild(sd_event_source* s, const siginfo_t* si, void* self);
  void drain();
  void ended(const siginfo_t& si);

  sd_event* event_;
  std::function<void(Exit)> onExit_;
  pid_t pid_ = 0;
  Fd pipe_;
  EventSource pipeSource_;
  EventSource childSource_;
  std::string output_;
};

}  // namespace iommud::adapters::systemd
