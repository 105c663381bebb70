#pragma once

#include <optional>
#include <string>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "app/host/change_record.hpp"
#include "core/exposure.hpp"
#include "core/findings.hpp"
#include "core/host.hpp"
#include "core/mode.hpp"
#include "core/score.hpp"

namespace iommud::app {

/// The host as iommud knows it: facts, the derived mode, findings, and what iommud changed.
struct Status {
  core::HostFacts host;
  core::HostMode mode;
  std::vector<core::Finding> findings;
  std::vector<ChangeRecord> changes;                    // what iommud changed on this host (its records), oldest first
  std::optional<adapters::dbus::DaemonSummary> daemon;  // the running daemon's own account, over D-Bus
  bool daemonAsked = false;  // whether the bus was asked (not under --root): no `daemon` then means not running
};

Status buildStatus(core::HostFacts host);

/// Every device's exposure (core::exposures), with the domain changes of iommud's records.
std::vector<core::DeviceExposure> exposuresOf(const Status& status);
/// The host's protection level and its criteria (docs/score.md).
core::Score scoreOf(const Status& status);
/// "3 devices can reach all memory: nvme0, nvme1, 0000:00:14.0" (or that none can).
std::string exposureSummary(const core::HostFacts& host, const std::vector<core::DeviceExposure>& exposures);

/// The findings that concern a device: those of the whole host, of its group, or naming it.
std::vector<const core::Finding*> findingsConcerning(const Status& status, const core::PciDevice& device);

/// Finds a device by PCI address (the domain may be left out), netdev name, NVMe controller or disk name.
const core::PciDevice* findDevice(const core::HostFacts& host, const std::string& name);

}  // namespace iommud::app
