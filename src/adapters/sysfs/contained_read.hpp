#pragma once

#include <fcntl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "support/unique_fd.hpp"

namespace iommud::adapters::sysfs {

using support::UniqueFd;

/// How a path is resolved inside a root: by the kernel (openat2 with RESOLVE_IN_ROOT, Linux 5.6
/// and later; the walk where the kernel says ENOSYS), or by the walk alone, one component at a
/// time (what tests use to check the walk on a kernel that has openat2).
enum class Resolver { Kernel, Walk };

/// Opens `path` (absolute or not, taken from `rootFd`) with `flags` as if `rootFd` were "/": ".."
/// stops at the root and every symlink, absolute or relative, is followed inside it; more than
/// 40 links is ELOOP (docs/kernel.md §13).
core::Result<UniqueFd> openInRoot(int rootFd, std::string_view path, int flags, Resolver resolver = Resolver::Kernel);

/// Opens a path of this machine's: one under `prefix` (a captured root) inside it, as if the
/// prefix were "/", from its directory held open for the opener's life; any other path as given.
/// For readers handed this machine's paths under --root (the policy layers are the root's, the
/// shipped layer and a file named on the command line are not). Copies share the directory.
class PrefixOpener {
 public:
  explicit PrefixOpener(std::string prefix);
  core::Result<UniqueFd> operator()(const std::string& path, int flags) const;

 private:
  std::string prefix_;                      // without a trailing slash
  std::shared_ptr<const UniqueFd> rootFd_;  // the prefix's directory (-1: could not be opened)
  int rootErrno_ = 0;                       // then why
};

/// The flags every whole-file read opens with: O_NONBLOCK, so that opening a FIFO returns at once
/// (then refused as not regular), and O_NOCTTY, so that a terminal never becomes ours.
inline constexpr int kReadFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

/// Refuses (EPERM) what is not a regular file: a FIFO, a device, a socket; a directory is EISDIR.
core::Result<core::Done> checkRegular(int fd, const std::string& path);
/// The same for a file mode (st_mode) already at hand.
core::Result<core::Done> checkRegularMode(unsigned mode, const std::string& path);

/// Reads an open file whole, refusing what is not a regular file (checkRegular) and more than `limit` bytes (EFBIG);
/// errors name `path`. The cap counts bytes read, never st_size, which sysfs gives as 4096 and procfs as 0. `oneRead`
/// stops after a read shorter than a page (support::ReadLimits).
core::Result<std::string> readRegularFile(int fd, const std::string& path, size_t limit, bool oneRead = false);

/// Opens `path` with kReadFlags and reads it with readRegularFile: for whole-file reads of paths
/// a hostile directory could hold (a boot image, a record a snapshot carries).
core::Result<std::string> readBoundedFile(const std::string& path, size_t limit);

/// Whether an error is a read refused for safety (not a regular file, too large, a link loop, an
/// escape from the root): reported as unreadable, never as a missing file.
bool isRefusal(const core::Error& e);

}  // namespace iommud::adapters::sysfs
