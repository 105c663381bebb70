#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/snapshot/tar.hpp"
#include "adapters/sysfs/root.hpp"
#include "core/result.hpp"

namespace iommud::app {

/// Replaces identifying values with stable tokens: the same value always gets the same token
/// within one snapshot, so relations (two mounts of one source) survive redaction.
class Redactor {
 public:
  std::string token(const std::string& original);

  /// Applies the redaction rules for one captured file (by its host path).
  std::string redactFile(std::string_view path, const std::string& content);

  std::string cmdline(std::string_view text);
  std::string mountInfo(std::string_view text);
  std::string swaps(std::string_view text);
  std::string procVersion(std::string_view text);
  /// Hex address columns of /proc/net/{route,ipv6_route,if_inet6}.
  std::string hexAddresses(std::string_view text, const std::vector<size_t>& columns);

 private:
  std::string hexToken(const std::string& original);
  std::map<std::string, std::string> tokens_;
  std::map<std::string, std::string> hexTokens_;
};

/// Turns what a probe read into tar members: paths below recorded links are moved to where
/// the links point (sysfs is full of links), and directories read but not descended into get
/// their entries as empty directories, so the tree answers the same reads the same way.
std::vector<adapters::snapshot::TarEntry> snapshotEntries(const std::vector<adapters::sysfs::Capture>& captures,
                                                          Redactor* redactor);

struct SnapshotSummary {
  size_t files = 0;
  size_t links = 0;
  size_t dirs = 0;
  size_t bytes = 0;
};

/// Reads the host under `root` as `iommuctl status` does and writes every file, link and
/// directory listing it read to a tar at `out`.
core::Result<SnapshotSummary> takeSnapshot(const std::string& root, const std::string& out, bool redact,
                                           long long mtime);

}  // namespace iommud::app
