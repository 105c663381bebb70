#pragma once

#include <string>

#include "core/result.hpp"

namespace iommud::adapters::state {

/// The one lock that serialises every writer of the system (the daemon, `iommuctl apply` and
/// `revert`): an exclusive flock(2) on a file in /run/iommud, released when the holder exits,
/// however it exits.
class WriterLock {
 public:
  /// Takes the lock; with `wait` false, fails at once with EWOULDBLOCK when another process has it.
  static core::Result<WriterLock> acquire(const std::string& path, bool wait);
  WriterLock(WriterLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  WriterLock& operator=(WriterLock&& other) noexcept;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();

 private:
  explicit WriterLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

/// Creates a directory and its parents with mode 0700 (what iommud keeps in /run and /var/lib is
/// for root alone); an existing directory is left as it is.
core::Result<core::Done> makeDirectories(const std::string& path);

}  // namespace iommud::adapters::state
