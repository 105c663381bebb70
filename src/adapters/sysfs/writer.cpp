#include "adapters/sysfs/writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace iommud::adapters::sysfs {

Result<Done> RootWriter::write(std::string_view path, std::string_view value) {
  std::string host = root_.hostPath(path);
  const UniqueFd fd(::open(host.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return core::errnoError(errno, std::string(path));
  // sysfs takes an attribute in one write; a short write would be a partial value.
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  int err = errno;
  if (n < 0) return core::errnoError(err, std::string(path));
  if (static_cast<size_t>(n) != value.size()) {
    return core::Error{EIO, std::string(path),
                       "short write (" + std::to_string(n) + " of " + std::to_string(value.size()) + " bytes)"};
  }
  return Done{};
}

}  // namespace iommud::adapters::sysfs
