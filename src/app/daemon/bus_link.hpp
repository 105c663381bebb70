#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapters/dbus/manager_service.hpp"
#include "adapters/systemd/event_loop.hpp"
#include "adapters/systemd/log.hpp"
#include "app/worker/worker_report.hpp"

namespace iommud::app {

/// What the daemon logs when its connection to the system bus goes and comes back (pure).
adapters::systemd::Entry busLinkEntry(const adapters::dbus::BusLinkEvent& e);

/// What the daemon does for its callers on the bus.
struct BusCalls {
  /// Plan, Apply, Revert: the worker's; `caller` is the uid the bus vouches for.
  std::function<void(WorkerCall, adapters::dbus::PendingCall, uint32_t caller)> call;
  std::function<std::vector<std::string>()> reload;  // the problems that kept the new settings out
  std::function<const adapters::dbus::HostSummary&()> host;
  std::function<adapters::dbus::DaemonSummary()> daemon;
  std::function<std::optional<std::string>(const std::string&)> watchDma;  // why it cannot measure, or nothing
  std::function<void(const std::string&)> unwatchDma;
};

/// org.iommud1 on the system bus, on `loop`: its calls go to `calls`, what becomes of the name and
/// of the connection is logged. nullptr (said in a notice) when there is no bus to connect to.
std::unique_ptr<adapters::dbus::ManagerService> serveOnBus(adapters::systemd::EventLoop& loop,
                                                           const adapters::systemd::Log& log, const BusCalls& calls);

}  // namespace iommud::app
