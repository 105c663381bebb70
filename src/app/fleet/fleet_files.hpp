#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/fleet/fleet_export.hpp"
#include "config/daemon_config.hpp"

namespace iommud::app {

/// Where the fleet exports go; nullopt: that export is off (docs/metrics.md).
struct ExportTargets {
  std::optional<std::string> prometheusFile;  // <directory>/iommud.prom
  std::optional<std::string> nfdFile;
  [[nodiscard]] bool any() const { return prometheusFile || nfdFile; }
};

/// What became of one export.
struct ExportResult {
  std::string path;
  bool written = false;  // false: the file already said this, or it could not be written
  std::string error;     // "PATH: REASON", stable for the same cause (the daemon logs each change)
};

/// Writes each enabled export whose content changed (as the file on disk says), atomically and
/// readable by all (0644); a file that says the same is not touched. `now`: seconds since the epoch.
std::vector<ExportResult> writeExports(const ExportTargets& targets, const Status& status, const Counters& counters,
                                       int64_t now);

/// Where the configuration puts the fleet exports (docs/metrics.md).
ExportTargets exportTargets(const config::DaemonConfig& config);

/// The files `before` wrote that `now` does not (turned off or moved by a reload): they go, as
/// what they say would grow stale.
std::vector<std::string> droppedExports(const ExportTargets& before, const ExportTargets& now);

}  // namespace iommud::app
