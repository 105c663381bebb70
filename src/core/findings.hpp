#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/mode.hpp"
#include "core/names.hpp"

namespace iommud::core {

enum class Severity { Info, Warning, Error };
inline constexpr Names<Severity, 3> kSeverityNames{
    {{Severity::Info, "info"}, {Severity::Warning, "warning"}, {Severity::Error, "error"}}};
static_assert(checkNames(kSeverityNames, Severity::Error));
std::string_view toString(Severity severity);

/// A way out of a finding, and the protection it gives up, in plain words.
struct Remedy {
  std::string action;
  std::string securityCost;
};

/// A known problem on this host: what it is, what it touches, what to do about it.
struct Finding {
  std::string id;  // stable: "vtd-iotlb-sync-map"
  Severity severity = Severity::Info;
  std::string title;
  std::string summary;
  std::vector<int> groups;
  std::vector<std::string> devices;
  std::vector<Remedy> remedies;
};

/// Kernel releases with the VT-d iotlb_sync_map lock regression (129dab6e1286 in 6.10, fixed by
/// 12724ce3fe1a in 6.17 and the stable releases 6.12.43, 6.15.11, 6.16.2).
const VersionSet& iotlbSyncMapAffected();

/// The ids findings() can produce, for validating policies that name one.
const std::vector<std::string_view>& knownFindingIds();

/// Every known problem the host shows, most severe first, then by id.
std::vector<Finding> findings(const HostFacts& host, const HostMode& mode);

}  // namespace iommud::core
