#include "app/daemon/bus_view.hpp"

namespace iommud::app {

namespace bus = adapters::dbus;

bool BusView::take(bus::HostSummary host) {
  if (host == host_) return false;
  host_ = std::move(host);
  return true;
}

void BusView::acted(const std::vector<bus::Action>& actions) {
  for (const auto& a : actions) {
    recent_.push_back(a);
    if (recent_.size() > bus::kRecentActions) recent_.pop_front();
  }
}

}  // namespace iommud::app
