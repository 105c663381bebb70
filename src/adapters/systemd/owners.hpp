#pragma once

#include <memory>

struct sd_event_source;

// RAII owners of what the daemon's loop holds: an sd-event source and a file descriptor.

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

}  // namespace iommud::adapters::systemd
