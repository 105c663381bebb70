#include "adapters/sysfs/contained_read.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <vector>

#include "support/whole_file.hpp"

namespace iommud::adapters::sysfs {

using core::errnoError;
using core::Error;

namespace {

constexpr int kMaxLinks = 40;  // the kernel's MAXSYMLINKS

// Set once openat2 is known to be missing (ENOSYS before Linux 5.6) or filtered (EPERM from a
// container's seccomp profile older than the call): the walk does the work from then on.
std::atomic<bool> noOpenat2{false};

// Adds the components of `path` to the walk's stack, the first one on top.
void pushComponents(std::vector<std::string>& todo, std::string_view path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

// A link met on the walk: its target's components go on the stack, from the root when it is absolute.
core::Result<core::Done> follow(const UniqueFd& link, std::vector<UniqueFd>& dirs, std::vector<std::string>& todo) {
  std::array<char, 4096> target;  // NOLINT(cppcoreguidelines-pro-type-member-init): filled by the syscall
  ssize_t n = ::readlinkat(link.get(), "", target.data(), target.size());
  if (n < 0) return errnoError(errno, "");
  if (target[0] == '/') dirs.resize(1);
  pushComponents(todo, std::string_view(target.data(), static_cast<size_t>(n)));
  return core::Done{};
}

// RESOLVE_IN_ROOT done in user space: each component opened with O_NOFOLLOW beside the
// directories held so far, so that ".." pops to a held directory (never above the first) and a
// link's target is pushed back as components, from the root when it is absolute.
core::Result<UniqueFd> walk(int rootFd, std::string_view path, int flags) {
  std::vector<UniqueFd> dirs;
  dirs.emplace_back(::openat(rootFd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dirs.back().get() < 0) return errnoError(errno, "");
  std::vector<std::string> todo;
  pushComponents(todo, path);
  int links = 0;
  while (!todo.empty()) {
    std::string name = std::move(todo.back());
    todo.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      if (dirs.size() > 1) dirs.pop_back();
      continue;
    }
    UniqueFd next(::openat(dirs.back().get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (next.get() < 0 || ::fstat(next.get(), &st) != 0) return errnoError(errno, "");
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxLinks) return errnoError(ELOOP, "");
      if (auto followed = follow(next, dirs, todo); !followed) return followed.error();
      continue;
    }
    if (todo.empty()) {
      // The last component; a link swapped in since the fstat above fails with ELOOP.
      UniqueFd fd(::openat(dirs.back().get(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC));
      if (fd.get() < 0) return errnoError(errno, "");
      return fd;
    }
    if (!S_ISDIR(st.st_mode)) return errnoError(ENOTDIR, "");
    dirs.push_back(std::move(next));
  }
  UniqueFd fd(::openat(dirs.back().get(), ".", flags | O_CLOEXEC));
  if (fd.get() < 0) return errnoError(errno, "");
  return fd;
}

const char* kindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

PrefixOpener::PrefixOpener(std::string prefix) : prefix_(std::move(prefix)) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  rootFd_ = std::make_shared<const UniqueFd>(
      prefix_.empty() ? -1 : ::open(prefix_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (rootFd_->get() < 0) rootErrno_ = errno;
}

core::Result<UniqueFd> PrefixOpener::operator()(const std::string& path, int flags) const {
  const bool inside =
      !prefix_.empty() && path.starts_with(prefix_) && (path.size() == prefix_.size() || path[prefix_.size()] == '/');
  if (!inside) {
    UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
    if (fd.get() < 0) return errnoError(errno, path);
    return fd;
  }
  if (rootFd_->get() < 0) return errnoError(rootErrno_, path);
  auto fd = openInRoot(rootFd_->get(), path.size() == prefix_.size() ? "/" : path.substr(prefix_.size()), flags);
  if (!fd) return Error{fd.error().code, path, fd.error().message};
  return fd;
}

core::Result<UniqueFd> openInRoot(int rootFd, std::string_view path, int flags, Resolver resolver) {
  if (resolver == Resolver::Kernel && !noOpenat2.load(std::memory_order_relaxed)) {
    open_how how{};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    const std::string p(path);
    long fd = ::syscall(SYS_openat2, rootFd, p.c_str(), &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    // EAGAIN: a rename or mount raced a ".." and the kernel could not vouch for the result
    // (docs/kernel.md §13); the walk holds its directories open and has no such race.
    if (errno == ENOSYS || errno == EPERM) {
      noOpenat2.store(true, std::memory_order_relaxed);
    } else if (errno != EAGAIN) {
      return errnoError(errno, "");
    }
  }
  return walk(rootFd, path, flags);
}

core::Result<core::Done> checkRegular(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errnoError(errno, path);
  return checkRegularMode(st.st_mode, path);
}

core::Result<core::Done> checkRegularMode(unsigned mode, const std::string& path) {
  if (S_ISDIR(mode)) return errnoError(EISDIR, path);  // what read(2) says of one
  if (!S_ISREG(mode)) return Error{EPERM, path, std::string(kindOf(mode)) + ", not a regular file: refused"};
  return core::Done{};
}

core::Result<std::string> readRegularFile(int fd, const std::string& path, size_t limit, bool oneRead) {
  if (auto regular = checkRegular(fd, path); !regular) return regular.error();
  return support::readWhole(fd, path, {.bytes = limit, .oneRead = oneRead});
}

core::Result<std::string> readBoundedFile(const std::string& path, size_t limit) {
  UniqueFd fd(::open(path.c_str(), kReadFlags));
  if (fd.get() < 0) return errnoError(errno, path);
  return readRegularFile(fd.get(), path, limit);
}

bool isRefusal(const core::Error& e) {
  return e.code == EPERM || e.code == EFBIG || e.code == ELOOP || e.code == EXDEV;
}

}  // namespace iommud::adapters::sysfs
