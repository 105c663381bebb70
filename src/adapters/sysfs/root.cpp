#include "adapters/sysfs/root.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace iommud::adapters::sysfs {

using core::errnoError;
using core::Error;

Root::Root(std::string prefix, Recorder* recorder) : prefix_(std::move(prefix)), recorder_(recorder) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
}

std::string Root::hostPath(std::string_view path) const {
  return prefix_ + std::string(path);
}

Result<std::string> Root::readFile(std::string_view path) const {
  std::string full = hostPath(path);
  int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errnoError(errno, full);
  std::string out;
  std::array<char, 4096> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): filled by the syscall
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return errnoError(err, full);
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
    // A sysfs attribute is at most one page and arrives in one read; don't pay a second syscall.
    if (static_cast<size_t>(n) < buf.size() && path.starts_with("/sys/")) break;
  }
  ::close(fd);
  if (recorder_ != nullptr) recorder_->add({Capture::Kind::File, std::string(path), out});
  return out;
}

Result<unsigned> Root::fileMode(std::string_view path) const {
  std::string full = hostPath(path);
  struct stat st {};
  if (::stat(full.c_str(), &st) != 0) return errnoError(errno, full);
  return static_cast<unsigned>(st.st_mode & 07777);
}

Result<std::string> Root::readLink(std::string_view path) const {
  std::string full = hostPath(path);
  std::array<char, 4096> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): filled by the syscall
  ssize_t n = ::readlink(full.c_str(), buf.data(), buf.size() - 1);
  if (n < 0) return errnoError(errno, full);
  std::string target(buf.data(), static_cast<size_t>(n));
  if (recorder_ != nullptr) recorder_->add({Capture::Kind::Link, std::string(path), target});
  return target;
}

Result<std::vector<std::string>> Root::listDir(std::string_view path) const {
  std::string full = hostPath(path);
  DIR* dir = ::opendir(full.c_str());
  if (dir == nullptr) return errnoError(errno, full);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  if (recorder_ != nullptr) {
    std::string joined;
    for (const auto& n : names) joined += n + "\n";
    recorder_->add({Capture::Kind::Dir, std::string(path), joined});
  }
  return names;
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
