#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/sysfs/contained_read.hpp"
#include "core/result.hpp"

namespace iommud::adapters::sysfs {

using core::Result;

/// One thing read through a Root: a file's bytes, a link's target, or a directory's entries; or
/// a path looked for and not there (ENOENT), which a probe found nothing at.
struct Capture {
  enum class Kind { File, Link, Dir, Missing };
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

/// The most a whole-file read takes unless its caller says otherwise: above every file the readers
/// read on a big host (a mountinfo of 10,000 mounts is 2 MB, an ACPI DMAR or IVRS table some KB,
/// a kernel config 300 KB), far below what would exhaust memory.
inline constexpr size_t kReadLimit = size_t{16} << 20U;

/// The filesystem root every reader works under: "/" on the live host, a directory holding a
/// captured or synthetic host otherwise. Paths given to it are absolute host paths, resolved
/// inside the root (a link or ".." never leaves it, docs/kernel.md §13).
class Root {
 public:
  explicit Root(std::string prefix = "/", Recorder* recorder = nullptr);

  /// Reads a whole regular file of at most `limit` bytes; a FIFO, a device or a larger file is
  /// refused (EPERM, EFBIG: isRefusal). sysfs files read in one go; larger ones in chunks.
  [[nodiscard]] Result<std::string> readFile(std::string_view path, size_t limit = kReadLimit) const;
  /// The target of a symbolic link, as stored (usually relative).
  [[nodiscard]] Result<std::string> readLink(std::string_view path) const;
  /// The entries of a directory, sorted, without "." and "..".
  [[nodiscard]] Result<std::vector<std::string>> listDir(std::string_view path) const;

  /// A file opened for reading (kReadFlags) inside the root, for a reader that hands it on.
  [[nodiscard]] Result<UniqueFd> openFile(std::string_view path) const { return open(path, kReadFlags); }

  /// The permission bits of a file (st_mode & 07777), following links.
  [[nodiscard]] Result<unsigned> fileMode(std::string_view path) const;

  /// The path on this machine's filesystem that stands for a host path.
  [[nodiscard]] std::string hostPath(std::string_view path) const;
  [[nodiscard]] const std::string& prefix() const { return prefix_; }
  /// This root with its directory held open, for one read of many files (a whole host): every
  /// read resolves from the same directory, which costs one open instead of one per read, and a
  /// tree replaced meanwhile is not mixed into the read. On the live host, /sys held open: a path
  /// under it opens from there (the same file, a walk two components shorter). The root itself
  /// when the directory cannot be opened (each read then says why).
  [[nodiscard]] Root held() const;
  /// This root with the directory `dir` (a host path) held open as well: a file directly in it
  /// (`dir + "/uevent"`) is opened by its name from there, without walking the whole path again,
  /// and listDir(dir) lists it from there; a name that is a link, and every other path, resolve
  /// from the root as before. When `dir` cannot be opened, listDir(dir) says why without trying
  /// again, and every other read is the root's own.
  [[nodiscard]] Root within(const std::string& dir) const;
  [[nodiscard]] bool isLive() const { return prefix_.empty(); }

 private:
  // Opens a host path inside the root; an error names the path on this machine.
  [[nodiscard]] Result<UniqueFd> open(std::string_view path, int flags) const;
  // The reads themselves; their public names record what they read, or that it was not there.
  [[nodiscard]] Result<std::string> readFileOnce(std::string_view path, size_t limit) const;
  [[nodiscard]] Result<std::string> readLinkOnce(std::string_view path) const;
  [[nodiscard]] Result<std::vector<std::string>> listDirOnce(std::string_view path) const;
  void recordMissing(std::string_view path, const core::Error& error) const;

  std::string prefix_;  // without trailing slash; empty for "/"
  Recorder* recorder_;
  // A file directly in within()'s directory, opened by name (O_NOFOLLOW); nullopt when `path`
  // is not one, or names a link (then it resolves from the root).
  [[nodiscard]] std::optional<Result<UniqueFd>> openBeside(std::string_view path, int flags) const;
  // The name of a file directly in within()'s directory; nullopt for any other path.
  [[nodiscard]] std::optional<std::string> besideName(std::string_view path) const;

  std::shared_ptr<const UniqueFd> dir_;             // the root's directory, when held()
  std::shared_ptr<const UniqueFd> sys_;             // /sys, when the live root is held()
  std::shared_ptr<const UniqueFd> within_;          // within()'s directory
  std::shared_ptr<const core::Error> withinError_;  // or why it could not be opened
  std::string withinPath_;                          // its host path (empty: none)
};

/// Lexically joins a symlink's directory and its relative target: ("/sys/bus/pci/devices",
/// "../../../devices/pci0000:00/0000:00:01.0") -> "/sys/devices/pci0000:00/0000:00:01.0".
std::string resolveLink(std::string_view linkPath, std::string_view target);

/// The last component of a path.
std::string_view baseName(std::string_view path);

/// Decompresses a gzip stream (for /proc/config.gz).
Result<std::string> gunzip(std::string_view data);

}  // namespace iommud::adapters::sysfs
