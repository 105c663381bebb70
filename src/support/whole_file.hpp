#pragma once

#include <cstddef>
#include <limits>
#include <string>

#include "core/result.hpp"

namespace iommud::support {

/// What a whole-file read does with a file longer than its limit.
enum class OverLimit {
  Refuse,  // an error, EFBIG
  Stop,    // what was read so far, past the limit: the caller's parser reports the size
};

/// How a whole-file read ends and how much it takes.
struct ReadLimits {
  size_t bytes = std::numeric_limits<size_t>::max();
  OverLimit over = OverLimit::Refuse;
  /// Stops after a read shorter than a page: a sysfs attribute arrives whole in one read (at most a
  /// page less one byte), a binary one a page at a time (docs/kernel.md §13), so a read of a whole
  /// page (an ACPI table, a config space) is not the end.
  bool oneRead = false;
};

/// The one whole-file read: reads `fd` to its end (EINTR retried), its errors naming `path`.
/// The limit counts bytes read, never st_size, which sysfs gives as 4096 and procfs as 0.
core::Result<std::string> readWhole(int fd, const std::string& path, ReadLimits limits = {});

}  // namespace iommud::support
