#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "core/result.hpp"

struct sd_bus;
struct sd_bus_message;
struct sd_bus_slot;
struct sd_event;

namespace iommud::adapters::dbus {

/// A method call the daemon answers when its worker is done. Owns a reference to the message;
/// one that is dropped unanswered replies with kErrorFailed, so no caller waits for its timeout.
class PendingCall {
 public:
  explicit PendingCall(sd_bus_message* m);
  PendingCall(PendingCall&& other) noexcept;
  PendingCall& operator=(PendingCall&& other) noexcept;
  PendingCall(const PendingCall&) = delete;
  PendingCall& operator=(const PendingCall&) = delete;
  ~PendingCall();

  void replyActions(const std::vector<Action>& actions);
  void replyText(const std::string& text);
  void replyEmpty();
  void replyError(const char* name, const std::string& message);

 private:
  sd_bus_message* m_ = nullptr;
};

/// org.iommud1.Manager on the system bus: properties from the daemon's views, methods handed to the
/// daemon as PendingCalls. Apply, Revert and Reload are refused to callers whose effective uid is not
/// 0 (the bus policy refuses them first; this check holds on any bus).
class ManagerService {
 public:
  struct Handlers {
    std::function<const HostSummary&()> host;
    std::function<DaemonSummary()> daemon;
    std::function<void(PendingCall, bool hotplug, std::string device)> plan;
    std::function<void(PendingCall, bool hotplug, std::string device)> apply;
    std::function<void(PendingCall, std::string device)> revert;
    std::function<void(PendingCall)> reload;
    std::function<void(const std::string& why)> nameLost;  // the bus refused kBusName
  };

  /// Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else the default socket), exports the
  /// object, takes kBusName and attaches to `loop`.
  static core::Result<std::unique_ptr<ManagerService>> start(sd_event* loop, Handlers handlers);

  ManagerService(const ManagerService&) = delete;
  ManagerService& operator=(const ManagerService&) = delete;
  ~ManagerService();

  /// The properties that change together: the host's (Vendor, Mode, Groups, Devices, Findings,
  /// Changes) when a fresh view differs, the daemon's own (State, Summary, StartedAt, LastRunAt,
  /// Rules, RecentActions) after work and on state changes.
  enum class Properties { Host, Daemon };
  /// PropertiesChanged for one set.
  void propertiesChanged(Properties which);
  /// The Acted signal: what one batch of work did.
  void acted(const std::string& trigger, const std::vector<Action>& actions);

  /// The bus connection's socket (for a forked child to close: the connection is the daemon's).
  [[nodiscard]] int fd() const;

  /// Used by the sd-bus callbacks.
  const Handlers& handlers() const { return handlers_; }

 private:
  explicit ManagerService(Handlers handlers) : handlers_(std::move(handlers)) {}
  Handlers handlers_;
  sd_bus* bus_ = nullptr;
  sd_bus_slot* slot_ = nullptr;
};

}  // namespace iommud::adapters::dbus
