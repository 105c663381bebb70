#include "adapters/state/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace iommud::adapters::state {

namespace {

// The temporary file: closed on every path out, removed unless it was renamed.
class Temporary {
 public:
  explicit Temporary(std::string path) : path_(std::move(path)) {}
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(path_.c_str());
  }

  int open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    return fd_;
  }
  // close(2) reports a delayed write error (NFS, quota): it counts.
  int close() {
    int r = ::close(fd_);
    fd_ = -1;
    return r;
  }
  void renamed() { renamed_ = true; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool renamed_ = false;
};

}  // namespace

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
  Temporary tmp(path.substr(0, base) + '.' + path.substr(base) + ".tmp." + std::to_string(::getpid()));
  const int fd = tmp.open();
  if (fd < 0) return core::errnoError(errno, tmp.path());
  if (mode && ::fchmod(fd, static_cast<mode_t>(*mode)) != 0) return core::errnoError(errno, tmp.path());
  if (auto w = writeFully(fd, bytes, tmp.path(), call); !w) return w;
  if ((durability == Durability::Synced && ::fsync(fd) != 0) || tmp.close() != 0) {
    return core::errnoError(errno, tmp.path());
  }
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) return core::errnoError(errno, path);
  tmp.renamed();
  return core::Done{};
}

}  // namespace iommud::adapters::state
