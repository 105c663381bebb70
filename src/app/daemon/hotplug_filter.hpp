#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "adapters/udev/monitor.hpp"
#include "app/worker/batch.hpp"

namespace iommud::app {

/// The daemon's hotplug bookkeeping, pure: uevents in, hot or cold decisions and debounced batches
/// out. The clock is an argument; the caller arms one timer at nextDeadline() and calls expire().
///
/// Hot: a device plugged in while the daemon runs. Not a device that was there at start (udev's
/// coldplug replays its add events, perhaps after READY), and not the daemon's own rebinds (a
/// transaction, a rollback, the recovery at start): only the next PCI add of that device. After a
/// failed change or a revert only a new plug (or a reload) acts again: the rollback's or the
/// revert's own bind events would otherwise start the same failing change over and over, or undo
/// the revert.
class HotplugFilter {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit HotplugFilter(std::chrono::microseconds debounce) : debounce_(debounce) {}
  void setDebounce(std::chrono::microseconds debounce) { debounce_ = debounce; }

  /// The PCI functions present at start: what udev replays of them later is no hotplug.
  void present(const std::vector<std::string>& addresses) { atStart_.insert(addresses.begin(), addresses.end()); }

  struct Verdict {
    enum class Kind {
      NotPci,     // no PCI function (virtual: loop, dm, veth; a Thunderbolt device, whose functions come as pci events)
      Removed,    // the PCI function went: everything pending for it is dropped
      Stopping,   // the daemon stops: nothing new is started
      LeftAlone,  // failed or reverted: ignored until a re-plug or a reload
      Pending,    // its debounce (re)starts
    };
    Kind kind = Kind::NotPci;
    std::string address;  // the PCI function the event is of
    bool hot = false;     // Pending: the device just appeared
    std::string why;      // LeftAlone: why
  };
  Verdict event(const adapters::udev::UEvent& e, TimePoint now, bool stopping);

  /// Events were lost (the monitor's socket overflowed, docs/kernel.md §12): the PCI functions
  /// `present` now are all there is to know. Known functions not among them went (forgotten;
  /// returned for the caller to forget too); those not known are new plugs (hot); every present
  /// function is queued at once for one batch, except one left alone that did not appear anew.
  std::vector<std::string> resync(const std::vector<std::string>& present, TimePoint now);

  /// When the earliest pending debounce ends; nullopt: none is pending.
  [[nodiscard]] std::optional<TimePoint> nextDeadline() const;
  /// Queues every device whose debounce ended by `now`.
  void expire(TimePoint now);
  [[nodiscard]] bool hasQueued() const { return !queued_.empty(); }
  /// The queued devices as the worker's next batch; the queue is empty after.
  Batch takeQueued();
  /// The whole host is done next: what is queued is part of it.
  void dropQueued() { queued_.clear(); }

  /// A worker starts, and ends: a device plugged in between is a new device, whatever the
  /// worker reports of its address; a device removed between is gone, whatever the worker saw of it.
  void workerStarted() {
    working_ = true;
    pluggedMeanwhile_.clear();
    removedMeanwhile_.clear();
  }
  void workerDone() { working_ = false; }
  /// The PCI functions removed while the last worker ran (until the next one starts): its report
  /// was read before they went, so what it says of them must not bring them back.
  [[nodiscard]] const std::set<std::string>& removedMeanwhile() const { return removedMeanwhile_; }

  // What the worker reported of a device.
  void forgetLeftAlone(const std::string& address) { leftAlone_.erase(address); }
  void clearLeftAlone() { leftAlone_.clear(); }
  void failed(const std::string& address);
  void reverted(const std::string& address);
  /// The worker rebound its driver: its bind events, already in or still coming, are the daemon's own.
  void rebound(const std::string& address);
  /// After a worker: drops what the events of devices left alone queued meanwhile (a rollback's binds).
  void dropLeftAlonePending();
  [[nodiscard]] bool leftAlone(const std::string& address) const { return leftAlone_.contains(address); }

  /// How long after its debounce ended a device's batch was done; once per queued device.
  std::optional<std::chrono::duration<double, std::milli>> reacted(const std::string& address, TimePoint now);

 private:
  void dropPending(const std::string& address);
  void forget(const std::string& address);

  std::chrono::microseconds debounce_;
  std::map<std::string, TimePoint> pending_;      // address -> when its debounce ends
  std::set<std::string> hot_;                     // pending devices that appeared
  std::map<std::string, bool> queued_;            // debounced, waiting for the worker -> hot
  std::map<std::string, TimePoint> firedAt_;      // when each queued device's debounce ended
  std::map<std::string, std::string> leftAlone_;  // failed or reverted -> why; wait for a re-plug
  std::set<std::string> rebound_;                 // devices the daemon rebound: their binds are not hot
  std::set<std::string> atStart_;                 // PCI functions present when the daemon started
  std::set<std::string> fresh_;                   // PCI functions plugged in since
  std::set<std::string> pluggedMeanwhile_;        // PCI functions plugged in while the worker runs
  std::set<std::string> removedMeanwhile_;        // PCI functions removed while the worker runs
  bool working_ = false;
};

}  // namespace iommud::app
