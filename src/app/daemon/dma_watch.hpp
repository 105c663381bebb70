#pragma once

#include <set>
#include <string>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "core/dma_stats.hpp"

namespace iommud::app {

/// Who watches the live DMA rates over D-Bus (WatchDma), by unique bus name: the daemon measures
/// while the set is not empty (docs/measure.md "Live rates on D-Bus"). Pure.
class DmaWatchers {
 public:
  /// What the daemon does about a join or a leave: start or stop measuring, or nothing.
  enum class Turn { Stays, Start, Stop };
  /// Start when the first watcher joins; a name already watching joins its own watch.
  Turn join(const std::string& name);
  /// Stop when the last one leaves; a name that was not watching changes nothing.
  Turn leave(const std::string& name);
  [[nodiscard]] bool any() const { return !names_.empty(); }
  [[nodiscard]] bool has(const std::string& name) const { return names_.contains(name); }

 private:
  std::set<std::string> names_;
};

/// The DmaRates signal's rows: the interval's devices (as the rates of `iommuctl top`), named as
/// the host's Devices property names them (the address when it names none).
std::vector<adapters::dbus::DmaRateView> dmaRateViews(const core::DmaInterval& interval,
                                                      const adapters::dbus::HostSummary& host);

}  // namespace iommud::app
