#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iommud::adapters::dbus {

/// The daemon's D-Bus API (dbus/org.iommud1.Manager.xml): one object on the system bus.
inline constexpr const char* kBusName = "org.iommud1";
inline constexpr const char* kObjectPath = "/org/iommud1";
inline constexpr const char* kInterface = "org.iommud1.Manager";

/// Errors the methods return, besides the bus's own (AccessDenied for a caller that is not root).
inline constexpr const char* kErrorNoSuchDevice = "org.iommud1.Error.NoSuchDevice";
inline constexpr const char* kErrorInvalidPolicy = "org.iommud1.Error.InvalidPolicy";
inline constexpr const char* kErrorFailed = "org.iommud1.Error.Failed";
inline constexpr const char* kErrorStopping = "org.iommud1.Error.Stopping";
inline constexpr const char* kErrorCannotMeasure = "org.iommud1.Error.CannotMeasure";

/// One thing iommud did or declined to do (an apply or revert outcome). Times are UTC, ISO 8601.
struct Action {
  std::string time;
  std::string result;  // done, advised, refused, failed, drift, kept, skipped
  std::string device;  // PCI address, or empty
  std::string message;
  bool operator==(const Action&) const = default;
};

/// The measured effect of a change on one device: the Measured signal's row (docs/measure.md).
struct EffectView {
  std::string device;  // PCI address
  std::string name;    // nvme0, or the address
  double secondsBefore = 0;
  double secondsAfter = 0;
  double mapsBefore = 0;  // maps/s (0 when the kernel cannot attribute maps: see mapsAttributed)
  double mapsAfter = 0;
  double bouncesBefore = 0;  // bounces/s
  double bouncesAfter = 0;
  std::string translatedBefore;  // yes, no, unknown
  std::string translatedAfter;
  bool mapsAttributed = false;  // false: a kernel before 6.12
  bool operator==(const EffectView&) const = default;
};

/// One device's live DMA over an interval: the DmaRates signal's row (docs/measure.md).
struct DmaRateView {
  std::string device;  // as the kernel names it: a PCI address
  std::string name;    // nvme0, or the address
  double mapsPerSecond = 0;
  double mappedMiBPerSecond = 0;
  double bouncesPerSecond = 0;
  uint64_t faults = 0;  // in the interval
  bool operator==(const DmaRateView&) const = default;
};

struct GroupView {
  int32_t id = 0;
  std::string type;  // identity, DMA, DMA-FQ, blocked, unknown
  std::vector<std::string> devices;
  bool operator==(const GroupView&) const = default;
};

struct DeviceView {
  std::string address;
  std::string name;  // nvme0, enp5s0, or empty
  std::string driver;
  int32_t group = -1;  // -1: no group
  bool untrusted = false;
  bool operator==(const DeviceView&) const = default;
};

struct FindingView {
  std::string id;
  std::string severity;
  std::string title;
  bool operator==(const FindingView&) const = default;
};

/// A change iommud made and still holds on record (what `revert` would restore).
struct ChangeView {
  std::string time;
  std::string device;
  std::string object;
  std::string key;
  std::string from;
  std::string to;
  std::string rule;
  bool operator==(const ChangeView&) const = default;
};

/// The host as the daemon last read it (after its last change), and what it did.
struct HostSummary {
  std::string vendor;  // intel, amd, arm-smmu-v3, ..., none
  std::string mode;    // off, identity, DMA, DMA-FQ, unknown
  std::vector<GroupView> groups;
  std::vector<DeviceView> devices;
  std::vector<FindingView> findings;
  std::vector<ChangeView> changes;
  bool operator==(const HostSummary&) const = default;
};

/// The daemon's own state: what the properties State, Summary, StartedAt, LastRunAt, Rules and
/// RecentActions say.
struct DaemonSummary {
  std::string state;    // starting, running, stopping (a reload keeps "running")
  std::string summary;  // "N devices tuned, N advised, N refused, N failed" (as STATUS=)
  std::string startedAt;
  std::string lastRunAt;  // when the last batch of work ended, or empty
  uint32_t rules = 0;
  std::vector<Action> recent;  // the last actions, oldest first (at most kRecentActions)
};
inline constexpr size_t kRecentActions = 64;

/// The text of a field that travels as one tab-separated column: tabs and line breaks become spaces.
std::string oneLine(std::string_view s);

}  // namespace iommud::adapters::dbus
