#pragma once

#include <unistd.h>

#include <utility>

// The one owner of a file descriptor: every descriptor the code opens is held by one, and this
// header is the one place that closes (tests/docs/owners.sh).

namespace iommud::support {

/// A file descriptor, closed with its owner; move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  /// Gives the descriptor up, unclosed (to fdopendir, whose DIR closes it, or to a child's exec).
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }
  /// Closes the descriptor held, if any, and holds `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) (void)::close(fd_);  // Linux frees the descriptor even when close fails
    fd_ = fd;
  }
  /// Closes the descriptor now and says what close(2) said: a delayed write error (NFS, quota)
  /// counts for a file just written. -1 with errno set, as close(2).
  int close() { return fd_ < 0 ? 0 : ::close(std::exchange(fd_, -1)); }

 private:
  int fd_ = -1;
};

}  // namespace iommud::support
