#pragma once

#include <string>
#include <vector>

#include "core/findings.hpp"

// The finding of a domain change iommud could not finish: a device its transaction unbound and
// nothing rebound, read from the journals kept in the run directory (app::unboundDevices).

namespace iommud::core {

inline constexpr std::string_view kDeviceLeftUnboundId = "device-left-unbound";

/// A device an unfinished transaction left without its driver.
struct UnboundDevice {
  std::string address;
  std::string driver;  // the one it had, which the journal names
  int group = 0;
  std::string journal;  // the file that keeps it for recovery
};

/// One error finding per device, naming it and the command that rebinds it.
std::vector<Finding> unboundFindings(const std::vector<UnboundDevice>& devices);

}  // namespace iommud::core
