#include "adapters/sysfs/root.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "support/whole_file.hpp"

namespace iommud::adapters::sysfs {

using core::errnoError;
using core::Error;

Root::Root(std::string prefix, Recorder* recorder) : prefix_(std::move(prefix)), recorder_(recorder) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
}

std::string Root::hostPath(std::string_view path) const {
  return prefix_ + std::string(path);
}

Root Root::held() const {
  if (dir_ || sys_) return *this;
  if (isLive()) {
    UniqueFd sys(::open("/sys", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (sys.get() < 0) return *this;
    Root out = *this;
    out.sys_ = std::make_shared<const UniqueFd>(std::move(sys));
    return out;
  }
  UniqueFd dir(::open(prefix_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return *this;
  Root out = *this;
  out.dir_ = std::make_shared<const UniqueFd>(std::move(dir));
  return out;
}

Root Root::within(const std::string& dir) const {
  // O_PATH: no open of the directory itself (a device's is only a place to open files from);
  // listDir(dir) opens "." from here.
  auto fd = open(dir, O_PATH | O_DIRECTORY);
  Root out = *this;
  out.withinPath_ = dir;
  if (fd) {
    out.within_ = std::make_shared<const UniqueFd>(std::move(fd).value());
    out.withinError_.reset();
  } else {
    out.within_.reset();
    out.withinError_ = std::make_shared<const Error>(fd.error());
  }
  return out;
}

std::optional<std::string> Root::besideName(std::string_view path) const {
  if (!within_ || path.size() <= withinPath_.size() + 1 || !path.starts_with(withinPath_) ||
      path[withinPath_.size()] != '/') {
    return std::nullopt;
  }
  std::string name(path.substr(withinPath_.size() + 1));
  if (name.find('/') != std::string::npos || name == "." || name == "..") return std::nullopt;
  return name;
}

std::optional<Result<UniqueFd>> Root::openBeside(std::string_view path, int flags) const {
  auto name = besideName(path);
  if (!name) return std::nullopt;
  UniqueFd fd(::openat(within_->get(), name->c_str(), flags | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    // ELOOP: a link, which resolves from the root; anything else is the file's own answer.
    if (errno == ELOOP) return std::nullopt;
    return Result<UniqueFd>(errnoError(errno, hostPath(path)));
  }
  return Result<UniqueFd>(std::move(fd));
}

Result<UniqueFd> Root::open(std::string_view path, int flags) const {
  if (isLive()) {
    // Under /sys, from /sys held open (held()): the same file as the whole path names.
    const bool fromSys = sys_ && path.starts_with("/sys/");
    const std::string name(fromSys ? path.substr(5) : path);
    UniqueFd fd(fromSys ? ::openat(sys_->get(), name.c_str(), flags | O_CLOEXEC)
                        : ::open(name.c_str(), flags | O_CLOEXEC));
    if (fd.get() < 0) return errnoError(errno, std::string(path));
    return fd;
  }
  if (dir_) {
    auto fd = openInRoot(dir_->get(), path, flags);
    if (!fd) return Error{fd.error().code, hostPath(path), fd.error().message};
    return fd;
  }
  // Opened for each call unless held(): a Root is a value and its directory may be replaced
  // between two reads (a test's tree, an unpacked snapshot).
  UniqueFd root(::open(prefix_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return errnoError(errno, hostPath(path));
  auto fd = openInRoot(root.get(), path, flags);
  if (!fd) return Error{fd.error().code, hostPath(path), fd.error().message};
  return fd;
}

Result<std::string> Root::readFileOnce(std::string_view path, size_t limit) const {
  if (!isLive()) {
    // A tree unpacked by root can hold device nodes, whose open alone runs a driver (a watchdog
    // starts counting): look before opening for reading. /sys and /proc of the live host hold none.
    // (Opening the file looked at again through /proc/self/fd instead of its path measured 40%
    // slower on bench/run-status: procfs' lookups cost more than the walk.)
    // A file beside within()'s directory is looked at by name, a link not followed (it then
    // resolves from the root as any path).
    bool beside = false;
    if (auto name = besideName(path)) {
      struct stat st {};
      if (::fstatat(within_->get(), name->c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return errnoError(errno, hostPath(path));
      }
      beside = !S_ISLNK(st.st_mode);
      if (beside) {
        if (auto regular = checkRegularMode(st.st_mode, hostPath(path)); !regular) return regular.error();
      }
    }
    if (!beside) {
      auto look = open(path, O_PATH);
      if (!look) return look.error();
      if (auto regular = checkRegular(look->get(), hostPath(path)); !regular) return regular.error();
    }
  }
  auto near = openBeside(path, kReadFlags);
  auto fd = near ? std::move(*near) : open(path, kReadFlags);
  if (!fd) return fd.error();
  // A sysfs attribute is less than a page and arrives in one read; don't pay a second syscall (a
  // binary one, read a page at a time, reads on).
  const bool sys = path.starts_with("/sys/");
  // The live host's /sys holds regular files, directories and links only (sysfs, and debugfs and
  // tracefs below it): nothing to look at after the open either.
  if (isLive() && sys) return support::readWhole(fd->get(), hostPath(path), {.bytes = limit, .oneRead = true});
  return readRegularFile(fd->get(), hostPath(path), limit, sys);
}

void Root::recordMissing(std::string_view path, const core::Error& error) const {
  if (recorder_ != nullptr && error.code == ENOENT) recorder_->add({Capture::Kind::Missing, std::string(path), {}});
}

Result<std::string> Root::readFile(std::string_view path, size_t limit) const {
  auto out = readFileOnce(path, limit);
  if (out && recorder_ != nullptr) recorder_->add({Capture::Kind::File, std::string(path), *out});
  if (!out) recordMissing(path, out.error());
  return out;
}

Result<std::string> Root::readLink(std::string_view path) const {
  auto target = readLinkOnce(path);
  if (target && recorder_ != nullptr) recorder_->add({Capture::Kind::Link, std::string(path), *target});
  if (!target) recordMissing(path, target.error());
  return target;
}

Result<std::vector<std::string>> Root::listDir(std::string_view path) const {
  auto names = listDirOnce(path);
  if (names && recorder_ != nullptr) {
    std::string joined;
    for (const auto& n : *names) joined += n + "\n";
    recorder_->add({Capture::Kind::Dir, std::string(path), joined});
  }
  if (!names) recordMissing(path, names.error());
  return names;
}

Result<unsigned> Root::fileMode(std::string_view path) const {
  struct stat st {};
  // Beside within()'s directory, by name, a link not followed (it then resolves from the root).
  if (auto name = besideName(path)) {
    if (::fstatat(within_->get(), name->c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return errnoError(errno, hostPath(path));
    if (!S_ISLNK(st.st_mode)) return static_cast<unsigned>(st.st_mode & 07777);
  }
  auto fd = open(path, O_PATH);
  if (!fd) return fd.error();
  if (::fstat(fd->get(), &st) != 0) return errnoError(errno, hostPath(path));
  return static_cast<unsigned>(st.st_mode & 07777);
}

Result<std::string> Root::readLinkOnce(std::string_view path) const {
  std::string full = hostPath(path);
  const size_t slash = path.rfind('/');
  const std::string dir(slash == std::string_view::npos || slash == 0 ? "/" : path.substr(0, slash));
  const std::string name(slash == std::string_view::npos ? path : path.substr(slash + 1));
  std::array<char, 4096> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): filled by the syscall
  ssize_t n = 0;
  if (within_ && dir == withinPath_) {  // beside within()'s directory: no walk to the parent
    n = ::readlinkat(within_->get(), name.c_str(), buf.data(), buf.size() - 1);
  } else {
    auto parent = open(dir, O_PATH | O_DIRECTORY);
    if (!parent) return Error{parent.error().code, full, parent.error().message};
    n = ::readlinkat(parent->get(), name.c_str(), buf.data(), buf.size() - 1);
  }
  if (n < 0) return errnoError(errno, full);
  return std::string(buf.data(), static_cast<size_t>(n));
}

namespace {

// The entries of an open directory, read with getdents64(2) itself: a DIR (fdopendir) costs an
// fstat, two fcntl and a 32 KiB allocation per directory, for nothing used here.
Result<std::vector<std::string>> namesIn(int fd, const std::string& path) {
  std::vector<std::string> names;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): filled by the syscall
  alignas(dirent64) std::array<char, 16384> buf;
  for (;;) {
    const ssize_t n = ::getdents64(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoError(errno, path);
    }
    if (n == 0) break;
    for (size_t at = 0; at < static_cast<size_t>(n);) {
      unsigned short length = 0;  // d_reclen, copied out rather than read through a cast
      std::memcpy(&length, buf.data() + at + offsetof(dirent64, d_reclen), sizeof length);
      if (length == 0) return Error{EIO, path, "a directory entry of no length"};  // no kernel's
      const std::string_view name(buf.data() + at + offsetof(dirent64, d_name));
      at += length;
      if (name != "." && name != "..") names.emplace_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<std::vector<std::string>> Root::listDirOnce(std::string_view path) const {
  // within()'s directory: from its descriptor, or what its open said.
  if (!withinPath_.empty() && path == withinPath_) {
    if (!within_) return withinError_ ? *withinError_ : errnoError(EBADF, hostPath(path));
    const UniqueFd again(::openat(within_->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (again.get() < 0) return errnoError(errno, hostPath(path));
    return namesIn(again.get(), hostPath(path));
  }
  auto fd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
  if (!fd) return fd.error();
  return namesIn(fd->get(), hostPath(path));
}

std::string resolveLink(std::string_view linkPath, std::string_view target) {
  std::vector<std::string_view> parts;
  auto push = [&](std::string_view p) {
    size_t i = 0;
    while (i <= p.size()) {
      size_t j = p.find('/', i);
      if (j == std::string_view::npos) j = p.size();
      auto part = p.substr(i, j - i);
      if (part == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!part.empty() && part != ".") {
        parts.push_back(part);
      }
      i = j + 1;
    }
  };
  if (!target.starts_with("/")) {
    auto slash = linkPath.rfind('/');
    push(linkPath.substr(0, slash == std::string_view::npos ? 0 : slash));
  }
  push(target);
  std::string out;
  for (auto p : parts) {
    out += '/';
    out += p;
  }
  return out.empty() ? "/" : out;
}

std::string_view baseName(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

Result<std::string> gunzip(std::string_view data) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return Error{0, {}, "zlib: cannot initialise"};
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  std::array<char, 65536> buf{};
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buf.data(), buf.size() - zs.avail_out);
    if (out.size() > (64U << 20)) {
      rc = Z_MEM_ERROR;
      break;
    }
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) return Error{0, {}, "not a valid gzip stream"};
  return out;
}

}  // namespace iommud::adapters::sysfs
