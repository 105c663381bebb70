#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace iommud::adapters::state {

/// The write(2) a writer calls: ::write, or a test's that is interrupted or writes short.
using WriteCall = ssize_t (*)(int fd, const void* buf, size_t count);

/// A test's hook at each step that changes iommud's own files (create, write, fsync, rename,
/// unlink of the change records, the transaction journal, modprobe.d, the exports), called before
/// the step with the step's name and path. Null outside tests (tests/unit's crash sweep sets it:
/// tests/README.md). It may throw, which a test takes as the process killed there, or return an
/// errno (ENOSPC, EIO) the step then fails with; 0 lets the step run.
using FaultHook = std::function<int(std::string_view step, const std::string& path)>;
void setFaultHook(FaultHook hook);
/// 0, or the errno the test's hook injects at this step.
int faultAt(std::string_view step, const std::string& path);

/// Syncs directory `dir`, so that a rename in it survives a crash (EINVAL, a file system that cannot
/// sync a directory, needs not to).
core::Result<core::Done> syncDirectory(const std::string& dir);

/// Writes all of `bytes` to `fd`, going on after a short write and after EINTR (a signal that
/// arrived during the call); an error names `path`.
core::Result<core::Done> writeFully(int fd, std::string_view bytes, const std::string& path, WriteCall call = ::write);

/// Whether a file must survive a crash as written: Synced (fsync before the rename: the records
/// revert restores from, modprobe.d), or Unsynced, for a copy that only has to be whole when read
/// and that a crash may leave as it was before (a reader takes a damaged one as empty). An fsync
/// of a disk file costs milliseconds.
enum class Durability { Synced, Unsynced };

/// The one atomic file writer: a temporary dot file beside `path` (".NAME.tmp.RANDOM", which readers
/// of a directory such as node-feature-discovery or modprobe skip; created with O_EXCL|O_NOFOLLOW,
/// so never a file or link that was there), written fully, fsync'd (Synced) and renamed over
/// `path`, then the directory fsync'd (Synced); on any failure the temporary goes and `path` is as
/// it was.
/// The file gets exactly `mode` when given (the daemon's umask is 0077; a node_exporter running as
/// its own user must read its file), else 0644 less the umask.
core::Result<core::Done> writeFileAtomic(const std::string& path, std::string_view bytes,
                                         std::optional<unsigned> mode = std::nullopt, WriteCall call = ::write,
                                         Durability durability = Durability::Synced);

/// Removes a file iommud wrote (a modprobe.d file it created, on revert); errors name `path`.
core::Result<core::Done> removeFile(const std::string& path);

/// Renames `from` to the first free "PREFIXn" (n from 1 up; "PREFIX", then "PREFIX-2", ... when
/// `numbered` is false), the directory synced: a file kept aside, never replaced. The new name.
core::Result<std::string> renameToFree(const std::string& from, const std::string& prefix, bool numbered);

/// Reads back a file iommud writes (an export), never through a link, never blocking on a FIFO or
/// reading a device: nullopt when absent; an error when it is not a regular file or holds more
/// than `maxBytes`.
core::Result<std::optional<std::string>> readOwnFile(const std::string& path, size_t maxBytes);

/// A directory iommud writes a file into for others to read (the fleet exports): it must be root's
/// (or this process's own user's) and not writable by group or others, else anyone who can write
/// there could swap the file for a link or a FIFO under the daemon; and every link on its path must
/// be root's: another user's could point it into any directory root may write.
core::Result<core::Done> checkOwnDirectory(const std::string& dir);

}  // namespace iommud::adapters::state
