#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace iommud::adapters::sysfs {

using core::Result;

/// One thing read through a Root: a file's bytes, a link's target, or a directory's entries.
struct Capture {
  enum class Kind { File, Link, Dir };
  Kind kind;
  std::string path;  // absolute, as the host sees it ("/sys/...")
  std::string data;  // file bytes, link target, or directory entries joined by '\n'
};

/// Collects what a probe read, so that `iommuctl snapshot` can store exactly that.
class Recorder {
 public:
  void add(Capture capture) { captures_.push_back(std::move(capture)); }
  [[nodiscard]] const std::vector<Capture>& captures() const { return captures_; }

 private:
  std::vector<Capture> captures_;
};

/// The filesystem root every reader works under: "/" on the live host, a directory holding a
/// captured or synthetic host otherwise. Paths given to it are absolute host paths.
class Root {
 public:
  explicit Root(std::string prefix = "/", Recorder* recorder = nullptr);

  /// Reads a whole (small) file. sysfs files read in one go; larger ones are read in chunks.
  [[nodiscard]] Result<std::string> readFile(std::string_view path) const;
  /// The target of a symbolic link, as stored (usually relative).
  [[nodiscard]] Result<std::string> readLink(std::string_view path) const;
  /// The entries of a directory, sorted, without "." and "..".
  [[nodiscard]] Result<std::vector<std::string>> listDir(std::string_view path) const;

  /// The permission bits of a file (st_mode & 07777), following links.
  [[nodiscard]] Result<unsigned> fileMode(std::string_view path) const;

  /// The path on this machine's filesystem that stands for a host path.
  [[nodiscard]] std::string hostPath(std::string_view path) const;
  [[nodiscard]] const std::string& prefix() const { return prefix_; }
  [[nodiscard]] bool isLive() const { return prefix_.empty(); }

 private:
  std::string prefix_;  // without trailing slash; empty for "/"
  Recorder* recorder_;
};

/// Lexically joins a symlink's directory and its relative target: ("/sys/bus/pci/devices",
/// "../../../devices/pci0000:00/0000:00:01.0") -> "/sys/devices/pci0000:00/0000:00:01.0".
std::string resolveLink(std::string_view linkPath, std::string_view target);

/// The last component of a path.
std::string_view baseName(std::string_view path);

/// Decompresses a gzip stream (for /proc/config.gz).
Result<std::string> gunzip(std::string_view data);

}  // namespace iommud::adapters::sysfs
