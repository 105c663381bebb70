#include "adapters/state/lock.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

namespace iommud::adapters::state {

namespace {

constexpr const char* kHeldBy = "another iommud process (the daemon or iommuctl) is changing the system: ";

support::UniqueFd openLockFile(const std::string& path) {
  return support::UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
}

// flock(2), EINTR retried: 0, or the errno.
int lockFile(int fd, bool wait) {
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

// The holder's name in the file, for whoever waits: "PID COMMAND\n". Best effort: a lock whose
// file cannot be written still serialises the writers.
void identify(int fd) {
  std::string comm = "unknown";
  if (FILE* f = std::fopen("/proc/self/comm", "re")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f) != nullptr) comm = buf;
    std::fclose(f);
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  }
  const std::string line = std::to_string(::getpid()) + " " + comm + "\n";
  if (::ftruncate(fd, 0) != 0) return;
  const ssize_t written = ::pwrite(fd, line.data(), line.size(), 0);
  static_cast<void>(written);  // best effort, as above
}

core::Error heldError(const std::string& path) {
  return core::Error{EWOULDBLOCK, path, kHeldBy + WriterLock::holderOf(path)};
}

}  // namespace

core::Result<WriterLock> WriterLock::acquire(const std::string& path, bool wait) {
  support::UniqueFd fd = openLockFile(path);
  if (!fd) return core::errnoError(errno, path);
  if (int err = lockFile(fd.get(), wait)) {
    if (err == EWOULDBLOCK) return heldError(path);
    return core::errnoError(err, path);
  }
  identify(fd.get());
  return WriterLock(std::move(fd));
}

core::Result<WriterLock> WriterLock::acquireWithin(const std::string& path, std::chrono::milliseconds bound,
                                                   const std::function<void(const std::string& holder)>& waiting) {
  support::UniqueFd fd = openLockFile(path);
  if (!fd) return core::errnoError(errno, path);
  // Watched before the first try, so that a release between the try and the wait is not missed:
  // the holder's last close of the file (its exit too) lets go of the flock.
  support::UniqueFd events(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!events) return core::errnoError(errno, path);
  if (::inotify_add_watch(events.get(), path.c_str(), IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) < 0)
    return core::errnoError(errno, path);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  bool told = false;
  for (;;) {
    int err = lockFile(fd.get(), false);
    if (err == 0) {
      identify(fd.get());
      return WriterLock(std::move(fd));
    }
    if (err != EWOULDBLOCK) return core::errnoError(err, path);
    if (!told && waiting) waiting(holderOf(path));
    told = true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      auto e = heldError(path);
      e.message += " (waited " + std::to_string(bound.count() / 1000) + " s)";
      return e;
    }
    pollfd p{events.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1LL << 30))) < 0 && errno != EINTR)
      return core::errnoError(errno, path);
    char buf[4096];
    while (::read(events.get(), buf, sizeof buf) > 0) {
    }
  }
}

std::string WriterLock::holderOf(const std::string& path) {
  const support::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  char buf[128] = {};
  const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  const auto space = text.find(' ');
  const auto end = text.find('\n');
  if (space == std::string::npos || end == std::string::npos || space == 0 || end < space) return "another process";
  return "pid " + text.substr(0, space) + " (" + text.substr(space + 1, end - space - 1) + ")";
}

core::Result<core::Done> makeDirectories(const std::string& path) {
  // Most often the directory is there: one mkdir says so. Else each component from the top.
  if (!path.empty() && (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST)) return core::Done{};
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string part = path.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return core::errnoError(errno, part);
  }
  return core::Done{};
}

}  // namespace iommud::adapters::state
