#pragma once

#include <string>

#include "core/result.hpp"
#include "support/unique_fd.hpp"

namespace iommud::adapters::state {

/// The one lock that serialises every writer of the system (the daemon, `iommuctl apply` and
/// `revert`): an exclusive flock(2) on a file in /run/iommud, released when the holder exits,
/// however it exits.
class WriterLock {
 public:
  /// Takes the lock; with `wait` false, fails at once with EWOULDBLOCK when another process has it.
  static core::Result<WriterLock> acquire(const std::string& path, bool wait);

 private:
  explicit WriterLock(support::UniqueFd fd) : fd_(std::move(fd)) {}
  support::UniqueFd fd_;  // closing the last descriptor releases the flock
};

/// Creates a directory and its parents with mode 0700 (what iommud keeps in /run and /var/lib is
/// for root alone); an existing directory is left as it is.
core::Result<core::Done> makeDirectories(const std::string& path);

}  // namespace iommud::adapters::state
