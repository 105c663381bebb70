#include "adapters/state/atomic_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>

#include "support/unique_fd.hpp"
#include "support/whole_file.hpp"

namespace iommud::adapters::state {

namespace {

FaultHook& faultHook() {
  static FaultHook hook;
  return hook;
}

// A name nobody can guess ahead: 64 random bits (the clock's if the kernel's pool is not ready at
// early boot; O_EXCL keeps even a guessed name from being anybody else's file).
std::string unguessable(int attempt) {
  uint64_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
    r = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<uint64_t>(::getpid()) << 32U) ^ static_cast<uint64_t>(attempt);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, r);
  return hex;
}

// The temporary file: created new (never an existing file or link), closed on every path out,
// removed unless it was renamed.
class Temporary {
 public:
  explicit Temporary(std::string prefix) : prefix_(std::move(prefix)) {}
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() {
    fd_.reset();
    if (created_ && !renamed_) ::unlink(path_.c_str());
  }

  int open() {
    for (int attempt = 0; attempt < 16; ++attempt) {
      path_ = prefix_ + unguessable(attempt);
      fd_.reset(::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
      if (fd_ || errno != EEXIST) break;
    }
    created_ = static_cast<bool>(fd_);
    return fd_.get();
  }
  // close(2) reports a delayed write error (NFS, quota): it counts.
  int close() { return fd_.close(); }
  void renamed() { renamed_ = true; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string prefix_;
  std::string path_;
  support::UniqueFd fd_;
  bool created_ = false;
  bool renamed_ = false;
};

}  // namespace

// A rename is durable only once its directory is: without this, a power loss can bring back the
// old name (and so, of two files renamed in turn, the second without the first).
core::Result<core::Done> syncDirectory(const std::string& dir) {
  if (int e = faultAt("fsync-dir", dir)) return core::errnoError(e, dir);
  const support::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return core::errnoError(errno, dir);
  const int r = ::fsync(fd.get());
  const int err = errno;
  // EINVAL: a file system that cannot sync a directory (and needs not to).
  if (r != 0 && err != EINVAL) return core::errnoError(err, dir);
  return core::Done{};
}

void setFaultHook(FaultHook hook) {
  faultHook() = std::move(hook);
}

int faultAt(std::string_view step, const std::string& path) {
  return faultHook() ? faultHook()(step, path) : 0;
}

core::Result<core::Done> writeFully(int fd, std::string_view bytes, const std::string& path, WriteCall call) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = call(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return core::errnoError(errno, path);
    if (n == 0) return core::errnoError(EIO, path);  // no progress on a regular file: give up, not spin
    done += static_cast<size_t>(n);
  }
  return core::Done{};
}

core::Result<core::Done> writeFileAtomic(const std::string& path, std::string_view bytes, std::optional<unsigned> mode,
                                         WriteCall call, Durability durability) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  Temporary tmp(path.substr(0, base) + '.' + path.substr(base) + ".tmp.");
  if (int e = faultAt("create", path)) return core::errnoError(e, path);
  const int fd = tmp.open();
  if (fd < 0) return core::errnoError(errno, tmp.path());
  if (mode && ::fchmod(fd, static_cast<mode_t>(*mode)) != 0) return core::errnoError(errno, tmp.path());
  if (int e = faultAt("write", path)) return core::errnoError(e, tmp.path());
  if (auto w = writeFully(fd, bytes, tmp.path(), call); !w) return w;
  if (durability == Durability::Synced) {
    if (int e = faultAt("fsync", path)) return core::errnoError(e, tmp.path());
  }
  if ((durability == Durability::Synced && ::fsync(fd) != 0) || tmp.close() != 0) {
    return core::errnoError(errno, tmp.path());
  }
  if (int e = faultAt("rename", path)) return core::errnoError(e, path);
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) return core::errnoError(errno, path);
  tmp.renamed();
  if (durability == Durability::Synced) return syncDirectory(base == 0 ? "." : path.substr(0, base));
  return core::Done{};
}

core::Result<core::Done> removeFile(const std::string& path) {
  if (int e = faultAt("unlink", path)) return core::errnoError(e, path);
  if (::unlink(path.c_str()) != 0) return core::errnoError(errno, path);
  // As a rename: the removal survives a crash only once the directory is synced.
  const auto dir = std::filesystem::path(path).parent_path().string();
  return syncDirectory(dir.empty() ? "." : dir);
}

core::Result<std::string> renameToFree(const std::string& from, const std::string& prefix, bool numbered) {
  std::string to = numbered ? prefix + "1" : prefix;
  // Taken: anything there, a dangling link too (rename would replace it).
  auto taken = [](const std::string& p) { return ::faccessat(AT_FDCWD, p.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0; };
  for (int n = 2; taken(to); ++n) to = prefix + (numbered ? "" : "-") + std::to_string(n);
  if (int e = faultAt("rename", from)) return core::errnoError(e, from);
  if (::rename(from.c_str(), to.c_str()) != 0) return core::errnoError(errno, from);
  auto dir = std::filesystem::path(to).parent_path().string();
  if (auto synced = syncDirectory(dir.empty() ? "." : dir); !synced) return synced.error();
  return to;
}

core::Result<std::optional<std::string>> readOwnFile(const std::string& path, size_t maxBytes) {
  const support::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) return std::optional<std::string>{};
    return core::errnoError(errno, path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return core::errnoError(errno, path);
  if (!S_ISREG(st.st_mode)) return core::Error{EINVAL, path, "not a regular file"};
  auto out = support::readWhole(fd.get(), path, {.bytes = maxBytes});
  if (!out) return out.error();
  return std::optional<std::string>{std::move(out).value()};
}

core::Result<core::Done> checkOwnDirectory(const std::string& dir) {
  struct stat st {};
  // A link on the way that another user owns could point the write anywhere root may write: each
  // component of the path that is a link must be root's (even this process's user's own is not
  // followed: the rule does not depend on who runs it).
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::lstat(part.c_str(), &st) != 0) break;  // the stat below says why
    if (S_ISLNK(st.st_mode) && st.st_uid != 0) {
      return core::Error{
          EPERM, dir,
          part + " is a link owned by uid " + std::to_string(st.st_uid) + ", not root: refusing to follow it"};
    }
  }
  if (::stat(dir.c_str(), &st) != 0) return core::errnoError(errno, dir);
  if (!S_ISDIR(st.st_mode)) return core::Error{ENOTDIR, dir, "not a directory"};
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return core::Error{EPERM, dir,
                       "owned by uid " + std::to_string(st.st_uid) + ", not root: refusing to write into it"};
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return core::Error{EPERM, dir,
                       std::string("writable by group or others (mode ") + mode + "): refusing to write into it"};
  }
  return core::Done{};
}

}  // namespace iommud::adapters::state
