#include "config/file_opener.hpp"

#include <fcntl.h>

#include <cerrno>

namespace iommud::config {

core::Result<support::UniqueFd> openOnHost(const std::string& path, int flags) {
  support::UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (fd.get() < 0) return core::errnoError(errno, path);
  return fd;
}

}  // namespace iommud::config
