#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapters/dbus/access.hpp"
#include "adapters/dbus/manager_api.hpp"
#include "adapters/dbus/polkit_client.hpp"
#include "adapters/systemd/owners.hpp"
#include "core/backoff.hpp"
#include "core/result.hpp"

struct sd_bus;
struct sd_bus_message;
struct sd_bus_slot;
struct sd_bus_track;
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

/// What happened to the connection to the system bus after it was made once.
struct BusLinkEvent {
  enum class Kind {
    Lost,      // the bus closed the connection (dbus-daemon restarted or stopped)
    Retrying,  // a reconnection failed; the next one is in `delay`
    Restored,  // connected again, the object exported and kBusName asked for
  };
  Kind kind = Kind::Lost;
  unsigned attempt = 0;                // Retrying, Restored: which attempt (1 for the first)
  std::chrono::milliseconds delay{0};  // Retrying: the wait before the next
  std::string error;                   // Retrying: why it failed
};

/// org.iommud1.Manager on the system bus: properties from the daemon's views, methods handed to the
/// daemon as PendingCalls. Apply, Revert and Reload are for root and for callers polkit authorises
/// (access.hpp; the shipped bus policy lets anyone send them, so this check is the one that holds).
/// When the bus goes away, the service reconnects with exponential backoff on its own and takes
/// the name again; the daemon goes on meanwhile.
class ManagerService {
 public:
  struct Handlers {
    std::function<const HostSummary&()> host;
    std::function<DaemonSummary()> daemon;
    // caller: the uid the bus vouches for
    std::function<void(PendingCall, bool hotplug, std::string device, uid_t caller)> plan;
    std::function<void(PendingCall, bool hotplug, std::string device, uid_t caller)> apply;
    std::function<void(PendingCall, std::string device, uid_t caller)> revert;
    std::function<void(PendingCall)> reload;
    /// WatchDma from a bus name not yet watching: why it cannot measure, or nothing (it watches).
    std::function<std::optional<std::string>(const std::string& watcher)> watchDma;
    /// The watcher called UnwatchDma or left the bus.
    std::function<void(const std::string& watcher)> unwatchDma;
    std::function<void(const std::string& why)> nameLost;  // the bus refused kBusName
    std::function<void(const BusLinkEvent&)> link;         // the connection went or came back
  };

  /// Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else the default socket), exports the
  /// object, takes kBusName and attaches to `loop`. A failure here is returned (no retry: the
  /// daemon runs without the API); a connection lost later is retried with `backoff`.
  static core::Result<std::unique_ptr<ManagerService>> start(sd_event* loop, Handlers handlers,
                                                             core::Backoff backoff = {});

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
  /// The Measured signal: the measured effect of the changes one piece of work made, per device,
  /// and the host's IOMMU page maps/s before and after.
  void measured(const std::vector<EffectView>& effects, double hostMapsBefore, double hostMapsAfter);

  /// The DmaRates signal: each device's DMA over the last `seconds`.
  void dmaRates(double seconds, bool mapsAttributed, const std::vector<DmaRateView>& devices);

  /// In a forked child (the worker): closes the child's copy of the connection's socket, so that
  /// a connection the daemon drops goes, not lingers in its worker. Only the socket: sd-bus
  /// refuses a forked child every call (ECHILD), and its unref would reach the parent's loop.
  void closeInChild();

  /// Used by the sd-bus callbacks.
  const Handlers& handlers() const { return handlers_; }
  /// Runs `granted` with the call if its sender may call `method` (root, or polkit's yes, asked
  /// without blocking); otherwise answers it with AccessDenied naming the polkit action.
  void authorize(sd_bus_message* m, Guarded method, std::function<void(PendingCall, uid_t)> granted);
  /// The sd-bus callbacks' entries.
  void nameRequested(sd_bus_message* reply);
  void disconnected();
  void retry();
  /// WatchDma; UnwatchDma from `sender`, or the bus saying that it left (sd_bus_track).
  void watchDma(sd_bus_message* m);
  void unwatchDma(const std::string& sender);

  /// One watcher of the DMA rates: its name, followed on the bus until it leaves.
  struct Watcher {
    Watcher(ManagerService& s, std::string n) : service(s), name(std::move(n)) {}
    Watcher(const Watcher&) = delete;
    Watcher& operator=(const Watcher&) = delete;
    ~Watcher();
    ManagerService& service;
    std::string name;
    sd_bus_track* track = nullptr;
  };

 private:
  /// One connection: the bus and the slots on it, closed with the owner.
  struct Connection {
    Connection() = default;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection();
    sd_bus* bus = nullptr;
    sd_bus_slot* object = nullptr;
    sd_bus_slot* filter = nullptr;
    int socket = -1;  // the bus's, noted at connect: sd_bus_get_fd says ECHILD in a forked child
  };
  ManagerService(sd_event* loop, Handlers handlers, core::Backoff backoff)
      : loop_(loop), handlers_(std::move(handlers)), backoff_(backoff) {}
  core::Result<core::Done> connect();
  void schedule(const std::string& why);
  /// Forgets every watcher, telling the daemon (false: it is going away, nothing to tell).
  void dropWatchers(bool tell);

  sd_event* loop_;
  Handlers handlers_;
  core::Backoff backoff_;
  PolkitClient polkit_;  // its questions are forgotten before their connection goes
  std::map<std::string, std::unique_ptr<Watcher>> watchers_;  // dropped before their connection
  std::unique_ptr<Connection> conn_;
  systemd::EventSource retryTimer_;  // the next reconnection, while the bus is away
  unsigned attempt_ = 0;             // reconnections tried since the connection was lost; 0: connected
};

}  // namespace iommud::adapters::dbus
