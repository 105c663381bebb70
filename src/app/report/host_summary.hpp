#pragma once

#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "app/host/change_record.hpp"
#include "app/host/status.hpp"

namespace iommud::app {

/// The host as org.iommud1's properties show it: mode, groups, devices, findings, and the changes
/// iommud holds on record.
adapters::dbus::HostSummary hostSummaryOf(const Status& status, const std::vector<ChangeRecord>& records);

}  // namespace iommud::app
