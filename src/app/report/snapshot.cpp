#include "app/report/snapshot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "adapters/state/atomic_file.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "core/cmdline.hpp"
#include "core/text.hpp"

namespace iommud::app {

using adapters::snapshot::TarEntry;
using adapters::sysfs::Capture;

std::string Redactor::token(const std::string& original) {
  auto [it, inserted] = tokens_.emplace(original, "");
  if (inserted) it->second = fmt::format("REDACTED-{}", tokens_.size());
  return it->second;
}

std::string Redactor::hexToken(const std::string& original) {
  if (std::all_of(original.begin(), original.end(), [](char c) { return c == '0'; })) return original;
  auto [it, inserted] = hexTokens_.emplace(original, "");
  if (inserted) {
    // Keep the IPv6 link-local prefix: it is not identifying and tells scopes apart.
    std::string head = original.size() == 32 && original.starts_with("fe80") ? "fe80" : "";
    auto n = fmt::format("{:x}", hexTokens_.size());
    it->second = head + std::string(original.size() - head.size() - n.size(), '0') + n;
  }
  return it->second;
}

std::string Redactor::cmdline(std::string_view text) {
  std::string out;
  bool initArgs = false;
  for (auto word : core::words(text)) {
    std::string w(word);
    if (!out.empty()) out += ' ';
    if (w == "--") {
      initArgs = true;
      out += w;
      continue;
    }
    auto eq = w.find('=');
    if (initArgs) {
      out += eq == std::string::npos ? token(w) : w.substr(0, eq + 1) + token(w.substr(eq + 1));
    } else if (eq == std::string::npos || core::isIommuRelated(w.substr(0, eq))) {
      out += w;
    } else {
      out += w.substr(0, eq + 1) + token(w.substr(eq + 1));
    }
  }
  return out + "\n";
}

namespace {

bool isStandardMountPoint(std::string_view p) {
  static const std::set<std::string_view> kept{"/",    "/boot", "/boot/efi", "/efi",   "/home",    "/var",
                                               "/usr", "/tmp",  "/srv",      "/opt",   "/proc",    "/sys",
                                               "/dev", "/run",  "/mnt",      "/media", "/var/log", "/nix"};
  return kept.contains(p) || p.starts_with("/sys/") || p.starts_with("/proc/") || p.starts_with("/dev/") ||
         p.starts_with("/run/");
}

}  // namespace

std::string Redactor::mountInfo(std::string_view text) {
  std::string out;
  for (auto line : core::split(text, '\n')) {
    if (line.empty()) continue;
    auto f = core::words(line);
    std::vector<std::string> fields(f.begin(), f.end());
    if (fields.size() >= 7) {
      if (!isStandardMountPoint(fields[4])) fields[4] = "/" + token(fields[4]);
      if (fields[3] != "/") fields[3] = "/" + token(fields[3]);
      auto dash = std::find(fields.begin() + 6, fields.end(), "-");
      if (dash != fields.end() && dash + 2 < fields.end()) {
        auto& source = *(dash + 2);
        if (!source.starts_with("/dev/") && source.find('/') != std::string::npos) source = token(source);
      }
    }
    out += fmt::format("{}\n", fmt::join(fields, " "));
  }
  return out;
}

std::string Redactor::swaps(std::string_view text) {
  std::string out;
  bool header = true;
  for (auto line : core::split(text, '\n')) {
    if (line.empty()) continue;
    auto f = core::words(line);
    std::vector<std::string> fields(f.begin(), f.end());
    if (!header && !fields.empty() && !fields[0].starts_with("/dev/")) fields[0] = "/" + token(fields[0]);
    header = false;
    out += fmt::format("{}\n", fmt::join(fields, "\t"));
  }
  return out;
}

std::string Redactor::procVersion(std::string_view text) {
  // "Linux version R (user@host) (gcc ...)": the builder may be a person on a self-built kernel.
  // Any "(word@word)" without spaces or nested parentheses is such a builder.
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find('(', pos);
    size_t close = open == std::string_view::npos ? open : text.find(')', open);
    if (close == std::string_view::npos) break;
    auto inner = text.substr(open + 1, close - open - 1);
    auto at = inner.find('@');
    bool builder = at != std::string_view::npos && at > 0 && at + 1 < inner.size() &&
                   inner.find_first_of(" \t(") == std::string_view::npos;
    out += text.substr(pos, open + 1 - pos);
    if (builder) {
      std::string user = token(std::string(inner.substr(0, at)));
      std::string host = token(std::string(inner.substr(at + 1)));
      out += user;
      out += '@';
      out += host;
    } else {
      out += inner;
    }
    out += ')';
    pos = close + 1;
  }
  out += text.substr(std::min(pos, text.size()));
  return out;
}

std::string Redactor::hexAddresses(std::string_view text, const std::vector<size_t>& columns) {
  std::string out;
  for (auto line : core::split(text, '\n')) {
    if (line.empty()) continue;
    auto f = core::words(line);
    std::vector<std::string> fields(f.begin(), f.end());
    for (size_t c : columns) {
      if (c < fields.size() && fields[c].size() >= 8 && std::all_of(fields[c].begin(), fields[c].end(), [](char ch) {
            return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
          })) {
        fields[c] = hexToken(fields[c]);
      }
    }
    out += fmt::format("{}\n", fmt::join(fields, " "));
  }
  return out;
}

std::string Redactor::redactFile(std::string_view path, const std::string& content) {
  if (path == "/proc/cmdline") return cmdline(content);
  if (path == "/proc/self/mountinfo") return mountInfo(content);
  if (path == "/proc/swaps") return swaps(content);
  if (path == "/proc/version") return procVersion(content);
  if (path == "/proc/net/route") return hexAddresses(content, {1, 2, 7});
  if (path == "/proc/net/ipv6_route") return hexAddresses(content, {0, 2, 4});
  if (path == "/proc/net/if_inet6") return hexAddresses(content, {0});
  if (path.find("/nvme/") != std::string_view::npos && path.ends_with("/serial")) {
    return token(std::string(core::trim(content))) + "\n";
  }
  // A NIC's MAC address identifies the machine as well as a serial does.
  if (path.find("/net/") != std::string_view::npos && path.ends_with("/address")) {
    return token(std::string(core::trim(content))) + "\n";
  }
  return content;
}

namespace {

using Links = std::map<std::string, std::string>;  // host path -> target
using Members = std::map<std::string, TarEntry>;   // by host path; map order puts parents first

// Rewrites a path so that no recorded link is a proper prefix of it.
std::string canonicalPath(const Links& links, std::string path) {
  for (int guard = 0; guard < 40; ++guard) {
    bool changed = false;
    for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      auto it = links.find(path.substr(0, slash));
      if (it != links.end()) {
        path = adapters::sysfs::resolveLink(it->first, it->second) + path.substr(slash);
        changed = true;
        break;
      }
    }
    if (!changed) break;
  }
  return path;
}

void addDir(Members& members, const std::string& path) {
  members.try_emplace(path, TarEntry{TarEntry::Kind::Dir, path.substr(1), "", 0755});
}

void addParents(Members& members, const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    addDir(members, path.substr(0, slash));
  }
}

}  // namespace

std::vector<TarEntry> snapshotEntries(const std::vector<Capture>& captures, Redactor* redactor) {
  Links links;
  for (const auto& c : captures) {
    if (c.kind == Capture::Kind::Link) links[c.path] = c.data;
  }
  Members members;
  for (const auto& c : captures) {
    if (c.kind == Capture::Kind::Missing) continue;  // a snapshot holds what was there
    std::string path = c.kind == Capture::Kind::Link ? canonicalPath(links, c.path.substr(0, c.path.rfind('/'))) +
                                                           c.path.substr(c.path.rfind('/'))
                                                     : canonicalPath(links, c.path);
    addParents(members, path);
    switch (c.kind) {
      case Capture::Kind::File: {
        std::string data = redactor != nullptr ? redactor->redactFile(c.path, c.data) : c.data;
        members[path] = TarEntry{TarEntry::Kind::File, path.substr(1), std::move(data), 0644};
        break;
      }
      case Capture::Kind::Link: members[path] = TarEntry{TarEntry::Kind::Symlink, path.substr(1), c.data, 0777}; break;
      case Capture::Kind::Dir:
        addDir(members, path);
        for (auto name : core::split(c.data, '\n')) {
          if (!name.empty()) addDir(members, path + "/" + std::string(name));
        }
        break;
      case Capture::Kind::Missing: break;
    }
  }
  std::vector<TarEntry> out;
  out.reserve(members.size());
  for (auto& [path, entry] : members) out.push_back(std::move(entry));
  return out;
}

core::Result<SnapshotSummary> takeSnapshot(const std::string& root, const std::string& out, bool redact,
                                           long long mtime) {
  adapters::sysfs::Recorder recorder;
  adapters::sysfs::Root reader(root, &recorder);
  auto host = adapters::sysfs::readHost(reader);
  if (!host) return host.error();
  Redactor redactor;
  auto entries = snapshotEntries(recorder.captures(), redact ? &redactor : nullptr);
  SnapshotSummary summary;
  for (const auto& e : entries) {
    if (e.kind == TarEntry::Kind::File) ++summary.files, summary.bytes += e.data.size();
    if (e.kind == TarEntry::Kind::Symlink) ++summary.links;
    if (e.kind == TarEntry::Kind::Dir) ++summary.dirs;
  }
  entries.push_back(TarEntry{
      TarEntry::Kind::File, "SNAPSHOT",
      fmt::format("iommud snapshot\nredacted: {}\nrelease: {}\n", redact ? "yes" : "no", host->kernel.release), 0644});
  // 0600: the tar holds what the host let root read (DMAR tables, serials unless redacted).
  auto written = adapters::state::writeFileAtomic(out, adapters::snapshot::encodeTar(entries, mtime), 0600);
  if (!written) return written.error();
  return summary;
}

}  // namespace iommud::app
