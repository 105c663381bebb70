#pragma once

#include <string>
#include <vector>

namespace iommud::app {

/// What the worker is given: devices that just appeared (hot: a hotplug, disruptive changes
/// allowed), devices that changed otherwise (cold: as at start), or, with both empty, the whole host.
struct Batch {
  std::vector<std::string> hot, cold;
  [[nodiscard]] bool whole() const { return hot.empty() && cold.empty(); }
  bool operator==(const Batch&) const = default;
};

}  // namespace iommud::app
