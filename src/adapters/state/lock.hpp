#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "core/result.hpp"
#include "support/unique_fd.hpp"

namespace iommud::adapters::state {

/// The one lock that serialises every writer of the system (the daemon, `iommuctl apply` and
/// `revert`): an exclusive flock(2) on a file in /run/iommud, released when the holder exits,
/// however it exits.
class WriterLock {
 public:
  /// Takes the lock; with `wait` false, fails at once with EWOULDBLOCK when another process has it
  /// (the error names the holder). The holder's pid and command are written into the file.
  static core::Result<WriterLock> acquire(const std::string& path, bool wait);
  /// Takes the lock, waiting at most `bound` for its holder to let go: `waiting` is told who holds
  /// it ("pid 812 (iommuctl)") once, when the wait begins. Woken by the holder's close of the file
  /// (inotify), not by a clock; EWOULDBLOCK naming the holder when the bound passes.
  static core::Result<WriterLock> acquireWithin(const std::string& path, std::chrono::milliseconds bound,
                                                const std::function<void(const std::string& holder)>& waiting);
  /// Who holds the lock at `path`, as its holder wrote it: "pid 812 (iommuctl)"; "another process"
  /// when the file says nothing readable.
  static std::string holderOf(const std::string& path);

 private:
  explicit WriterLock(support::UniqueFd fd) : fd_(std::move(fd)) {}
  support::UniqueFd fd_;  // closing the last descriptor releases the flock
};

/// Creates a directory and its parents with mode 0700 (what iommud keeps in /run and /var/lib is
/// for root alone); an existing directory is left as it is.
core::Result<core::Done> makeDirectories(const std::string& path);

}  // namespace iommud::adapters::state
