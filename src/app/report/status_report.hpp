#pragma once

#include <string>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "app/change/change_record.hpp"
#include "core/exposure.hpp"
#include "core/findings.hpp"
#include "core/host.hpp"
#include "core/mode.hpp"
#include "core/protections.hpp"
#include "core/score.hpp"

namespace iommud::app {

class JsonWriter;

/// The host as `iommuctl status` shows it: facts, the derived mode, and findings.
struct Status {
  core::HostFacts host;
  core::HostMode mode;
  std::vector<core::Finding> findings;
  std::vector<ChangeRecord> changes;                    // what iommud changed on this host (its records), oldest first
  std::optional<adapters::dbus::DaemonSummary> daemon;  // the running daemon's own account, over D-Bus
};

Status buildStatus(core::HostFacts host);

/// Every device's exposure (core::exposures), with the domain changes of iommud's records.
std::vector<core::DeviceExposure> exposuresOf(const Status& status);
/// The host's protection level and its criteria (docs/score.md).
core::Score scoreOf(const Status& status);
/// The reasons as `--json` writes them: [{"source", "text"}].
void writeReasonsJson(JsonWriter& w, const std::vector<core::Reason>& reasons);
/// "3 devices can reach all memory: nvme0, nvme1, 0000:00:14.0" (or that none can).
std::string exposureSummary(const core::HostFacts& host, const std::vector<core::DeviceExposure>& exposures);

/// Version of the `--json` schema (docs/status-json.md, docs/schema/status.schema.json); bumped on incompatible
/// changes.
inline constexpr int kStatusSchemaVersion = 1;

/// The `--json` document (docs/status-json.md), newline-terminated.
std::string statusJson(const Status& status);

/// One device or finding as `status --json` writes it (reused by `explain --json`).
void writeDeviceJson(JsonWriter& w, const core::PciDevice& d);
void writeFindingJson(JsonWriter& w, const core::Finding& f);

/// The human summary. `color` adds ANSI colours (only for a terminal).
std::string statusText(const Status& status, bool color);

}  // namespace iommud::app
