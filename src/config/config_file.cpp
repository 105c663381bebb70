#include "config/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "support/unique_fd.hpp"
#include "support/whole_file.hpp"

namespace iommud::config::detail {
namespace {

Diagnostic fileError(const std::string& path, std::string message) {
  return Diagnostic{core::SourceLoc{path, 0, 0}, Diagnostic::Severity::Error, std::move(message)};
}

std::string octal(unsigned mode) {
  std::array<char, 8> buf{};
  std::snprintf(buf.data(), buf.size(), "%04o", mode & 07777U);
  return buf.data();
}

// The path the kernel gives the open file: what it really is, links resolved (inside the root for
// a contained opener), without looking the name up again.
std::optional<std::string> openedPath(int fd) {
  std::array<char, PATH_MAX> buf{};
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(self.c_str(), buf.data(), buf.size() - 1);
  if (n <= 0 || buf[0] != '/') return std::nullopt;
  return std::string(buf.data(), static_cast<size_t>(n));
}

std::string baseOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Whether `path`'s last component is a symbolic link, looked at without following it.
bool isSymlink(const std::string& path, const FileOpener& opener) {
  auto dir = opener(directoryOf(path), O_PATH | O_DIRECTORY);
  struct stat st {};
  return dir && ::fstatat(dir->get(), baseOf(path).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

}  // namespace

std::string directoryOf(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::optional<Diagnostic> WriterCheck::judge(const std::string& path, const struct stat& st,
                                             std::string_view what) const {
  if (st.st_uid != owner_) {
    return fileError(path, "refusing " + std::string(what) + " owned by uid " + std::to_string(st.st_uid) +
                               ", not uid " + std::to_string(owner_) +
                               ": anyone who can write it controls iommud; run: chown " + std::to_string(owner_) + ' ' +
                               path);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fileError(path, "refusing " + std::string(what) + " writable by group or others (mode " + octal(st.st_mode) +
                               "): anyone who can write it controls iommud; run: chmod go-w " + path);
  }
  return std::nullopt;
}

std::optional<Diagnostic> WriterCheck::judgeDirectory(const std::string& dir, std::string_view what,
                                                      const FileOpener& opener) {
  if (!judged_.insert(dir).second) return std::nullopt;
  auto fd = opener(dir, O_PATH | O_DIRECTORY);
  struct stat st {};
  if (!fd || ::fstat(fd->get(), &st) != 0) return std::nullopt;  // opening the file reports what is missing
  return judge(dir, st, what);
}

ConfigFileText readConfigFile(const std::string& path, size_t maxBytes, WriterCheck* check, std::string_view what,
                              const FileOpener& opener) {
  ConfigFileText out;
  // O_NONBLOCK: a FIFO in its place opens at once, to be refused below, instead of hanging.
  auto opened = opener(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (!opened) {
    out.unreadable = core::Error{opened.error().code, path, opened.error().message};
    return out;
  }
  support::UniqueFd fd = std::move(opened).value();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    out.unreadable = core::errnoError(errno, path);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.unreadable =
        S_ISDIR(st.st_mode) ? core::errnoError(EISDIR, path) : core::Error{EPERM, path, "not a regular file: refused"};
    return out;
  }
  if (check != nullptr) {
    const std::string dirWhat = std::string(what) + "'s directory";
    if (auto e = check->judgeDirectory(directoryOf(path), dirWhat, opener)) out.refusals.push_back(*e);
    // Through a symlink, the directory the file really is in can be written by others too.
    auto real = openedPath(fd.get());
    if (real) {
      if (auto e = check->judgeDirectory(directoryOf(*real), dirWhat, opener)) out.refusals.push_back(*e);
    }
    const bool symlink = real && isSymlink(path, opener);
    if (auto e = check->judge(symlink ? *real : path, st, what)) {
      if (symlink) e->message = "a symlink to " + *real + ": " + e->message;
      e->where.file = path;
      out.refusals.push_back(*e);
      return out;
    }
  }
  // Stopped past the cap, not refused: parseToml reports the size, located like its other errors.
  auto text = support::readWhole(fd.get(), path, {.bytes = maxBytes, .over = support::OverLimit::Stop});
  if (!text) {
    out.unreadable = text.error();
    return out;
  }
  out.text = std::move(text).value();
  return out;
}

}  // namespace iommud::config::detail
