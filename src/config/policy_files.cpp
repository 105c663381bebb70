// The I/O half of policy loading: finding files in the layers, checking who may write them,
// reading them. Parsing is in policy_loader.cpp.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>

#include "config/policy_loader.hpp"
#include "config/toml_support.hpp"

namespace iommud::config {
namespace {

using core::SourceLoc;

Diagnostic fileError(const std::string& path, std::string message) {
  return Diagnostic{SourceLoc{path, 0, 0}, Diagnostic::Severity::Error, std::move(message)};
}

std::string octal(unsigned mode) {
  std::array<char, 8> buf{};
  std::snprintf(buf.data(), buf.size(), "%04o", mode & 07777U);
  return buf.data();
}

// sshd's StrictModes for one path: owned by the expected user, not writable by group or others.
std::optional<Diagnostic> checkOwner(const std::string& path, const struct stat& st, unsigned owner, const char* what) {
  if (st.st_uid != owner) {
    return fileError(path, std::string("refusing ") + what + " owned by uid " + std::to_string(st.st_uid) +
                               ", not uid " + std::to_string(owner) + ": anyone who can write it controls iommud");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fileError(path, std::string("refusing ") + what + " writable by group or others (mode " + octal(st.st_mode) +
                               "); run: chmod go-w " + path);
  }
  return std::nullopt;
}

struct Found {
  core::PolicyFile file;
  std::string dir;
};

bool isMask(const std::string& path) {
  std::array<char, 64> buf{};
  ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size() - 1);
  if (n > 0 && std::string_view(buf.data(), static_cast<size_t>(n)) == "/dev/null") return true;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

}  // namespace

core::Result<std::string> detail::readCapped(const std::string& path, size_t maxBytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return core::errnoError(errno, path);
  std::string out;
  std::array<char, 65536> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): filled by read
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return core::errnoError(err, path);
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
    if (out.size() > maxBytes) break;  // parseToml reports the size
  }
  ::close(fd);
  return out;
}

Loaded loadPolicies(const std::vector<std::string>& dirs, const std::vector<std::string>& files,
                    const LoadOptions& options) {
  std::vector<Diagnostic> diags;
  std::map<std::string, Found> byName;  // file name -> the winner; std::map gives the lexical order
  auto consider = [&](const std::string& name, const std::string& path, const std::string& dir) {
    auto [it, fresh] = byName.try_emplace(name);
    if (!fresh) {
      it->second.file.shadowed.push_back(path);
      return;
    }
    it->second.dir = dir;
    it->second.file.name = name;
    it->second.file.path = path;
    it->second.file.masked = isMask(path);
  };
  for (const auto& f : files) {
    auto slash = f.rfind('/');
    consider(slash == std::string::npos ? f : f.substr(slash + 1), f, "");
  }
  for (const auto& dir : dirs) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno != ENOENT && errno != ENOTDIR) diags.push_back(fileError(dir, std::strerror(errno)));
      continue;
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 5 && name.ends_with(".toml") && name[0] != '.') names.push_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) consider(n, dir + "/" + n, dir);
  }

  std::vector<core::PolicyFile> order;
  std::vector<ParsedFile> parsed;
  std::map<std::string, bool> dirChecked;
  for (auto& [name, found] : byName) {
    auto& file = found.file;
    if (file.masked) {
      order.push_back(file);
      continue;
    }
    if (options.requireOwner) {
      struct stat st {};
      if (!found.dir.empty() && !dirChecked.contains(found.dir)) {
        dirChecked[found.dir] = true;
        if (::stat(found.dir.c_str(), &st) == 0) {
          if (auto e = checkOwner(found.dir, st, *options.requireOwner, "a policy directory")) diags.push_back(*e);
        }
      }
      if (::stat(file.path.c_str(), &st) == 0) {
        if (auto e = checkOwner(file.path, st, *options.requireOwner, "a policy file")) {
          diags.push_back(*e);
          continue;
        }
      }
    }
    auto text = detail::readCapped(file.path, kMaxPolicyBytes);
    if (!text) {
      diags.push_back(fileError(file.path, text.error().message));
      continue;
    }
    parsed.push_back(parsePolicyText(*text, file.path));
    order.push_back(file);
  }
  auto loaded = combine(std::move(order), std::move(parsed));
  diags.insert(diags.end(), loaded.diagnostics.begin(), loaded.diagnostics.end());
  loaded.diagnostics = std::move(diags);
  return loaded;
}

}  // namespace iommud::config
