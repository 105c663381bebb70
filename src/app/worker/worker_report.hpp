#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "app/fleet/fleet_export.hpp"
#include "app/worker/batch.hpp"
#include "core/measured_effect.hpp"
#include "core/names.hpp"
#include "core/result.hpp"

namespace iommud::app {

/// What one piece of work decided about one device, for the daemon's bookkeeping of hot and cold
/// devices and for its STATUS= tallies.
enum class DeviceNews {
  Forget,     // forget what was known of it (first, for every device the work decides on)
  Tuned,      // a wanted setting holds
  Advised,    // a change was advised
  Refused,    // a change was refused
  Failed,     // a change failed: leave it alone until a re-plug or a reload
  Replugged,  // a departed identity is back
  Rebound,    // the worker rebound its driver: its bind events are no hotplug
  Reverted,   // a revert restored it: leave it alone until a re-plug or a reload
};
inline constexpr core::Names<DeviceNews, 8> kDeviceNewsNames{{{DeviceNews::Forget, "forget"},
                                                              {DeviceNews::Tuned, "tuned"},
                                                              {DeviceNews::Advised, "advised"},
                                                              {DeviceNews::Refused, "refused"},
                                                              {DeviceNews::Failed, "failed"},
                                                              {DeviceNews::Replugged, "replugged"},
                                                              {DeviceNews::Rebound, "rebound"},
                                                              {DeviceNews::Reverted, "reverted"}}};
static_assert(core::checkNames(kDeviceNewsNames, DeviceNews::Reverted));

struct DeviceEvent {
  DeviceNews news = DeviceNews::Forget;
  std::string address;
  std::string identity;  // empty where the worker did not know it
  bool operator==(const DeviceEvent&) const = default;
};

/// A D-Bus call the worker could not do: the error's D-Bus name and its message.
struct CallError {
  std::string name;
  std::string message;
  bool operator==(const CallError&) const = default;
};

/// A fleet export the worker wrote, or could not write (error empty: it is up to date).
struct ExportNews {
  std::string path;
  std::string error;
  bool operator==(const ExportNews&) const = default;
};

/// Everything the worker tells the daemon about one piece of work. It crosses a process boundary
/// as encodeReport()'s bytes and comes back whole through decodeReport(); nothing else is sent.
struct WorkerReport {
  std::vector<DeviceEvent> devices;             // in the order they happened
  std::vector<adapters::dbus::Action> actions;  // outcomes, for RecentActions and D-Bus replies
  Counters counters;                            // what the outcomes add to the exported counters
  std::vector<ExportNews> exports;
  std::optional<CallError> error;                   // the D-Bus call could not be done
  std::optional<std::string> planJson;              // the answer to Plan
  std::optional<adapters::dbus::HostSummary> host;  // a fresh view of the host (the D-Bus properties)
  std::vector<core::EffectSubject> changed;         // the devices done changes concerned (measured effect)
  bool complete = true;                             // false: the work was cut short (the host unreadable)
  bool operator==(const WorkerReport&) const = default;
};

/// A D-Bus method the worker does.
struct WorkerCall {
  enum class Kind { Plan, Apply, Revert };
  static constexpr core::Names<Kind, 3> kKindNames{
      {{Kind::Plan, "plan"}, {Kind::Apply, "apply"}, {Kind::Revert, "revert"}}};
  Kind kind = Kind::Apply;
  bool hotplug = false;
  std::string device;  // a PCI address or a name (netdev, NVMe controller); empty: every device
  bool operator==(const WorkerCall&) const = default;
};
static_assert(core::checkNames(WorkerCall::kKindNames, WorkerCall::Kind::Revert));

/// One piece of work the daemon hands its worker, and what of the daemon's state the work needs
/// (the worker stays, so it holds none of its own). It crosses the socket as encodeRequest()'s
/// bytes and comes back whole through decodeRequest().
struct WorkerRequest {
  enum class Kind {
    Batch,    // devices (or, with an empty batch, the whole host) reconciled
    Call,     // a D-Bus method
    View,     // a read of the host for the D-Bus properties and the fleet exports
    Recover,  // the transaction a worker that died left half-done, finished or rolled back
  };
  static constexpr core::Names<Kind, 4> kKindNames{
      {{Kind::Batch, "batch"}, {Kind::Call, "call"}, {Kind::View, "view"}, {Kind::Recover, "recover"}}};
  Kind kind = Kind::Batch;
  Batch batch;
  WorkerCall call;
  bool wantsView = false;                       // a view after the work: the bus or an export wants one
  bool busView = false;                         // the view carries the host as the D-Bus properties show it
  Counters counters;                            // the daemon's counters so far, for the exports
  std::map<std::string, std::string> departed;  // identity of a tuned device that went -> its address
  bool operator==(const WorkerRequest&) const = default;
};
static_assert(core::checkNames(WorkerRequest::kKindNames, WorkerRequest::Kind::Recover));

/// A batch's devices, the hot ones first.
std::vector<std::string> devicesOf(const Batch& batch);

/// The work in a few words, for the log: a device, "3 devices", "the whole host", "a D-Bus call"...
std::string describe(const WorkerRequest& work);

/// What set the work off, as the Acted signal names it: hotplug, change, coldplug, apply, revert, plan.
std::string triggerName(const WorkerRequest& work);

/// The request as bytes (compact JSON).
std::string encodeRequest(const WorkerRequest& request);

/// The request back from encodeRequest()'s bytes; anything else is an error.
core::Result<WorkerRequest> decodeRequest(std::string_view bytes);

/// The report as bytes (compact JSON).
std::string encodeReport(const WorkerReport& report);

/// The report back from encodeReport()'s bytes; anything else (truncated, garbage, a field of the
/// wrong type) is an error, never a partial report.
core::Result<WorkerReport> decodeReport(std::string_view bytes);

}  // namespace iommud::app
