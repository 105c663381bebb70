#pragma once

#include <map>
#include <string>

#include "app/daemon/hotplug_filter.hpp"
#include "app/worker/worker_report.hpp"

namespace iommud::app {

/// What the policies did to each device present, as the daemon counts it for STATUS= (pure): the
/// worker's DeviceEvents in, the status line out; and the identities of tuned devices that went,
/// so that a re-plug is known (nothing is stored per device beyond the daemon's life).
class DeviceTallies {
 public:
  /// A pass over the whole host follows: what was known goes (and a pass cut short is forgotten).
  void clear() {
    tallies_.clear();
    wholeHostCutShort_ = false;
  }
  /// A pass over the whole host ended without news (cut short): what was known stays,
  /// and the status line says so until a whole pass ends.
  void wholeHostCutShort() {
    wholeHostCutShort_ = true;
    anyFailed_ = true;
  }
  /// One piece of news about one device (the hotplug filter takes the rest of it).
  void take(const DeviceEvent& e);
  /// The device went: its tally goes, and a tuned one with an identity is remembered as departed.
  /// True when it had a tally (the status line changed).
  bool removed(const std::string& address);

  /// Identity of a tuned device that went -> the address it had.
  [[nodiscard]] const std::map<std::string, std::string>& departed() const { return departed_; }
  /// Whether any change failed since the start.
  [[nodiscard]] bool anyFailed() const { return anyFailed_; }
  /// "N devices tuned, N advised, N refused, N failed" (a failed device is not counted tuned), and
  /// "; the pass over the whole host was cut short ..." after one was.
  [[nodiscard]] std::string statusLine() const;

 private:
  struct Tally {
    std::string identity;
    bool tuned = false, advised = false, refused = false, failed = false;
  };
  std::map<std::string, Tally> tallies_;         // address -> what the policies did to it
  std::map<std::string, std::string> departed_;  // identity of a tuned device that went -> its address
  bool anyFailed_ = false;
  bool wholeHostCutShort_ = false;
};

/// A piece of work's news of devices, taken in (pure): the tallies, and what the hotplug filter
/// must leave alone (a failed change, a revert) or take as the daemon's own rebinds. Work over the
/// whole host starts both afresh.
void absorb(const std::vector<DeviceEvent>& news, bool wholeHost, DeviceTallies& tallies, HotplugFilter& filter);

/// Work over devices that ended without news (WorkerReport::complete false: its worker died in it
/// twice, and it is not tried a third time, or could not report), taken in (pure): each device it was for counts as
/// failed and is left alone until a re-plug or a reload, as after a failed change; work over the
/// whole host keeps what was known and is said in the status line. Never counted as nothing done.
void absorbCutShort(const std::vector<std::string>& devices, bool wholeHost, DeviceTallies& tallies,
                    HotplugFilter& filter);

}  // namespace iommud::app
