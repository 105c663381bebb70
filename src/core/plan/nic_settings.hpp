#pragma once

// The ethtool settings (rings, channels, coalescing) rules ask of each device's network
// interfaces: against what the driver reports and allows, and when a link reset may happen.

#include <vector>

#include "core/plan/context.hpp"
#include "core/plan/recorder.hpp"

namespace iommud::core::planning {

void planNicSettings(const HostCtx& host, const std::vector<DeviceCtx>& devices, Recorder& out);

}  // namespace iommud::core::planning
