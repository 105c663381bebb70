#include "config/config_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>

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

std::optional<Diagnostic> WriterCheck::judgeDirectory(const std::string& dir, std::string_view what) {
  if (!judged_.insert(dir).second) return std::nullopt;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;  // opening the file reports what is missing
  return judge(dir, st, what);
}

ConfigFileText readConfigFile(const std::string& path, size_t maxBytes, WriterCheck* check, std::string_view what) {
  ConfigFileText out;
  // O_NONBLOCK: a FIFO in its place opens at once, to be refused below, instead of hanging.
  support::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
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
    if (auto e = check->judgeDirectory(directoryOf(path), dirWhat)) out.refusals.push_back(*e);
    // Through a symlink, the directory the file really is in can be written by others too.
    std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
    if (real) {
      if (auto e = check->judgeDirectory(directoryOf(real.get()), dirWhat)) out.refusals.push_back(*e);
    }
    struct stat link {};
    bool symlink = real && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    if (auto e = check->judge(symlink ? real.get() : path, st, what)) {
      if (symlink) e->message = "a symlink to " + std::string(real.get()) + ": " + e->message;
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
