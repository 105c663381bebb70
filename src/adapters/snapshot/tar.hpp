#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace iommud::adapters::snapshot {

/// One member of a tar archive.
struct TarEntry {
  enum class Kind { File, Dir, Symlink };
  Kind kind = Kind::File;
  std::string path;  // relative, no leading slash: "sys/bus/pci/devices/0000:00:01.0"
  std::string data;  // file contents, or the link target
  unsigned mode = 0644;
};

/// Encodes a POSIX ustar archive (GNU long-name records for paths over the ustar limits) with
/// fixed owner root and mtime `mtime`, so the same input gives the same bytes.
std::string encodeTar(const std::vector<TarEntry>& entries, long long mtime);

}  // namespace iommud::adapters::snapshot
