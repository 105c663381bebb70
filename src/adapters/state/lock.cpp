#include "adapters/state/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace iommud::adapters::state {

core::Result<WriterLock> WriterLock::acquire(const std::string& path, bool wait) {
  support::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return core::errnoError(errno, path);
  int rc = 0;
  do {
    rc = ::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    if (err == EWOULDBLOCK)
      return core::Error{err, path, "another iommud process (the daemon or iommuctl) is changing the system"};
    return core::errnoError(err, path);
  }
  return WriterLock(std::move(fd));
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
