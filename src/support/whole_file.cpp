#include "support/whole_file.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>

namespace iommud::support {

namespace {

// kernfs hands a binary attribute over at most a page per read (4 KiB, 64 KiB on some arm64
// kernels); the buffer is never smaller.
size_t pageSize() {
  static const size_t page = [] {
    const long n = ::sysconf(_SC_PAGESIZE);
    return n > 0 ? static_cast<size_t>(n) : size_t{4096};
  }();
  return page;
}

}  // namespace

core::Result<std::string> readWhole(int fd, const std::string& path, ReadLimits limits) {
  std::string out;
  std::array<char, 65536> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): filled by the syscall
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return core::errnoError(errno, path);
    }
    if (n == 0) break;
    const auto got = static_cast<size_t>(n);
    if (out.size() + got > limits.bytes && limits.over == OverLimit::Refuse) {
      return core::Error{EFBIG, path, "more than " + std::to_string(limits.bytes) + " bytes: refused"};
    }
    out.append(buf.data(), got);
    if (out.size() > limits.bytes) break;  // OverLimit::Stop
    if (limits.oneRead && got < pageSize()) break;
  }
  return out;
}

}  // namespace iommud::support
