#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/exposure.hpp"
#include "core/protections.hpp"

namespace iommud::core {

/// One criterion of the protection level (docs/score.md).
struct Criterion {
  std::string id;           // "no-device-reaches-all-memory", ...
  int level = 1;            // the level it belongs to
  std::optional<bool> met;  // nullopt: not knowable here (usually: not root)
  std::string text;         // why it is or is not met
};

/// A host's protection level, 0 to 3, and every criterion behind it: the highest level whose
/// criteria, and those of every level below, are all met (an unknown one is not met).
struct Score {
  int level = 0;
  std::vector<Criterion> criteria;
};

/// Scores a host from the exposures and protections in effect (docs/score.md).
Score score(const HostFacts& host, const std::vector<DeviceExposure>& exposures, const Protections& protections);

}  // namespace iommud::core
