#pragma once

#include <string>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "app/change_record.hpp"
#include "core/findings.hpp"
#include "core/host.hpp"
#include "core/mode.hpp"

namespace iommud::app {

/// The host as `iommuctl status` shows it: facts, the derived mode, and findings.
struct Status {
  core::HostFacts host;
  core::HostMode mode;
  std::vector<core::Finding> findings;
  std::vector<ChangeRecord> changes;                    // what iommud changed on this host (its records), oldest first
  std::optional<adapters::dbus::DaemonSummary> daemon;  // the running daemon's own account, over D-Bus
};

Status buildStatus(core::HostFacts host);

/// Version of the `--json` schema (docs/status-json.md, docs/schema/status.schema.json); bumped on incompatible
/// changes.
inline constexpr int kStatusSchemaVersion = 1;

/// The `--json` document (docs/status-json.md), newline-terminated.
std::string statusJson(const Status& status);

class JsonWriter;
/// One device or finding as `status --json` writes it (reused by `explain --json`).
void writeDeviceJson(JsonWriter& w, const core::PciDevice& d);
void writeFindingJson(JsonWriter& w, const core::Finding& f);

/// The human summary. `color` adds ANSI colours (only for a terminal).
std::string statusText(const Status& status, bool color);

}  // namespace iommud::app
