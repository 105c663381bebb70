#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/plan/context.hpp"

namespace iommud::core::planning {

// The devices by what rule conditions name, so that a rule is tried only on the devices its most
// selective condition can select: a PCI id, a kind, or the literal prefix of an address, name or
// driver glob (names and addresses sorted make each prefix a range).
class DeviceIndex {
 public:
  explicit DeviceIndex(std::vector<DeviceCtx>& devices);

  // The devices `m` may match, in host order: a superset, as every condition is checked after.
  [[nodiscard]] std::vector<DeviceCtx*> candidates(const DeviceMatch& m) const;

 private:
  using Keyed = std::vector<std::pair<std::string_view, DeviceCtx*>>;
  [[nodiscard]] std::span<const std::pair<uint16_t, DeviceCtx*>> vendorRange(uint16_t v) const;

  std::vector<DeviceCtx*> all_;  // host order, which is pointer order
  std::array<std::vector<DeviceCtx*>, 4> kinds_;
  std::vector<std::pair<uint16_t, DeviceCtx*>> vendors_;
  Keyed addresses_, names_, drivers_;
};

}  // namespace iommud::core::planning
