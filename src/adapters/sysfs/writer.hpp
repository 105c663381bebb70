#pragma once

#include <string_view>

#include "adapters/sysfs/root.hpp"
#include "core/result.hpp"

namespace iommud::adapters::sysfs {

using core::Done;

/// Writes sysfs attributes: the one way iommud changes the kernel through /sys, so that tests can
/// put a fake kernel behind it. Reads go through Root, and see what the writes did.
class SysfsWriter {
 public:
  SysfsWriter() = default;
  SysfsWriter(const SysfsWriter&) = delete;
  SysfsWriter& operator=(const SysfsWriter&) = delete;
  virtual ~SysfsWriter() = default;

  /// Writes `value` to the attribute at host path `path` in one write(2), as sysfs expects; the
  /// Error carries the kernel's errno.
  virtual Result<Done> write(std::string_view path, std::string_view value) = 0;
};

/// The real writer: the attribute under the Root's prefix.
class RootWriter final : public SysfsWriter {
 public:
  explicit RootWriter(const Root& root) : root_(root) {}
  Result<Done> write(std::string_view path, std::string_view value) override;

 private:
  const Root& root_;
};

}  // namespace iommud::adapters::sysfs
