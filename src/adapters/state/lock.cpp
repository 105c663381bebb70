#include "adapters/state/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace iommud::adapters::state {

core::Result<WriterLock> WriterLock::acquire(const std::string& path, bool wait) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return core::errnoError(errno, path);
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      return core::Error{err, path, "another iommud process (the daemon or iommuctl) is changing the system"};
    return core::errnoError(err, path);
  }
  return WriterLock(fd);
}

WriterLock& WriterLock::operator=(WriterLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

core::Result<core::Done> makeDirectories(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string part = path.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return core::errnoError(errno, part);
  }
  return core::Done{};
}

}  // namespace iommud::adapters::state
