#include "app/daemon/dma_watch.hpp"

#include <algorithm>

namespace iommud::app {

DmaWatchers::Turn DmaWatchers::join(const std::string& name) {
  const bool first = names_.empty();
  names_.insert(name);
  return first ? Turn::Start : Turn::Stays;
}

DmaWatchers::Turn DmaWatchers::leave(const std::string& name) {
  if (names_.erase(name) == 0) return Turn::Stays;
  return names_.empty() ? Turn::Stop : Turn::Stays;
}

std::vector<adapters::dbus::DmaRateView> dmaRateViews(const core::DmaInterval& interval,
                                                      const adapters::dbus::HostSummary& host) {
  std::vector<adapters::dbus::DmaRateView> rows;
  for (const auto& d : interval.devices) {
    auto known = std::find_if(host.devices.begin(), host.devices.end(),
                              [&](const adapters::dbus::DeviceView& v) { return v.address == d.device; });
    const bool named = known != host.devices.end() && !known->name.empty();
    rows.push_back({d.device, named ? known->name : d.device, d.mapsPerSecond, d.mappedMiBPerSecond, d.bouncesPerSecond,
                    d.delta.faults});
  }
  return rows;
}

}  // namespace iommud::app
