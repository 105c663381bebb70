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
#include <memory>

#include "config/config_file.hpp"
#include "config/policy_loader.hpp"

namespace iommud::config {
namespace {

using core::SourceLoc;

Diagnostic fileError(const std::string& path, std::string message) {
  return Diagnostic{SourceLoc{path, 0, 0}, Diagnostic::Severity::Error, std::move(message)};
}

struct Found {
  core::PolicyFile file;
  std::string dir;
};

// What a file is, its links followed (by `opener`: inside the root under --root).
std::optional<struct stat> statOf(const std::string& path, const FileOpener& opener) {
  auto fd = opener(path, O_PATH);
  struct stat st {};
  if (!fd || ::fstat(fd->get(), &st) != 0) return std::nullopt;
  return st;
}

// A link to /dev/null (its target read, not followed: under --root the root's /dev is no device)
// or an empty file.
bool isMask(const std::string& path, const std::string& dir, const std::string& name, const FileOpener& opener) {
  if (auto d = opener(dir, O_PATH | O_DIRECTORY)) {
    std::array<char, 64> buf{};
    ssize_t n = ::readlinkat(d->get(), name.c_str(), buf.data(), buf.size() - 1);
    if (n > 0 && std::string_view(buf.data(), static_cast<size_t>(n)) == "/dev/null") return true;
  }
  auto st = statOf(path, opener);
  return st && S_ISREG(st->st_mode) && st->st_size == 0;
}

bool sameFile(const std::string& a, const std::string& b, const FileOpener& opener) {
  auto sa = statOf(a, opener);
  auto sb = statOf(b, opener);
  return sa && sb && sa->st_dev == sb->st_dev && sa->st_ino == sb->st_ino;
}

// The *.toml files of one layer's directory, in lexical order; an absent directory is an empty layer.
std::vector<std::string> policyNames(const std::string& dir, const FileOpener& opener, std::vector<Diagnostic>& diags) {
  std::vector<std::string> names;
  auto fd = opener(dir, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    const int err = fd.error().code;
    if (err != ENOENT && err != ENOTDIR) diags.push_back(fileError(dir, std::strerror(err)));
    return names;
  }
  std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(fd->get()), ::closedir);
  if (!d) {
    diags.push_back(fileError(dir, std::strerror(errno)));
    return names;
  }
  (void)fd->release();  // the DIR owns it now
  while (const dirent* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    if (name.size() > 5 && name.ends_with(".toml") && name[0] != '.') names.push_back(name);
  }
  d.reset();
  std::sort(names.begin(), names.end());
  return names;
}

// Each file name's winner: the files named first, then the layers in order; a later file of the
// same name is shadowed.
std::map<std::string, Found> findPolicyFiles(const std::vector<std::string>& dirs,
                                             const std::vector<std::string>& files, const FileOpener& opener,
                                             std::vector<Diagnostic>& diags) {
  std::map<std::string, Found> byName;  // file name -> the winner; std::map gives the lexical order
  auto consider = [&](const std::string& name, const std::string& path, const std::string& dir) {
    auto [it, fresh] = byName.try_emplace(name);
    if (!fresh) {
      // A file named on the command line is also found in its own layer: it replaces nothing.
      if (!sameFile(it->second.file.path, path, opener)) it->second.file.shadowed.push_back(path);
      return;
    }
    it->second.dir = dir;
    it->second.file.name = name;
    it->second.file.path = path;
    it->second.file.masked = isMask(path, detail::directoryOf(path), name, opener);
  };
  for (const auto& f : files) {
    auto slash = f.rfind('/');
    consider(slash == std::string::npos ? f : f.substr(slash + 1), f, "");
  }
  for (const auto& dir : dirs) {
    for (const auto& n : policyNames(dir, opener, diags)) consider(n, dir + "/" + n, dir);
  }
  return byName;
}

}  // namespace

Loaded loadPolicyFiles(const std::vector<std::string>& dirs, const std::vector<std::string>& files,
                       const LoadOptions& options) {
  std::vector<Diagnostic> diags;
  const FileOpener& opener = options.opener;
  auto byName = findPolicyFiles(dirs, files, opener, diags);
  std::vector<core::PolicyFile> order;
  std::vector<ParsedFile> parsed;
  std::optional<detail::WriterCheck> check;
  if (options.requireOwner) check.emplace(*options.requireOwner);
  for (auto& [name, found] : byName) {
    auto& file = found.file;
    if (file.masked) {
      order.push_back(file);
      continue;
    }
    // The layer's directory first: a file put there by someone else is refused on its own.
    if (check && !found.dir.empty()) {
      if (auto e = check->judgeDirectory(found.dir, "a policy directory", opener)) diags.push_back(*e);
    }
    auto read = detail::readConfigFile(file.path, kMaxPolicyBytes, check ? &*check : nullptr, "a policy file", opener);
    diags.insert(diags.end(), read.refusals.begin(), read.refusals.end());
    if (read.unreadable) {
      diags.push_back(fileError(file.path, read.unreadable->message));
      continue;
    }
    if (!read.text) continue;  // refused
    parsed.push_back(parsePolicyText(*read.text, file.path));
    order.push_back(file);
  }
  auto loaded = combine(std::move(order), std::move(parsed));
  diags.insert(diags.end(), loaded.diagnostics.begin(), loaded.diagnostics.end());
  loaded.diagnostics = std::move(diags);
  return loaded;
}

}  // namespace iommud::config
