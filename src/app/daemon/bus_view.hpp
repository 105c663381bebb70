#pragma once

#include <deque>
#include <vector>

#include "adapters/dbus/manager_api.hpp"

namespace iommud::app {

/// What the daemon keeps for D-Bus between works: the last view of the host, the recent actions.
class BusView {
 public:
  /// Takes a fresh view of the host; true when it differs from the last (its properties changed).
  bool take(adapters::dbus::HostSummary host);
  /// Appends a work's actions; only the last kRecentActions are kept.
  void acted(const std::vector<adapters::dbus::Action>& actions);
  [[nodiscard]] const adapters::dbus::HostSummary& host() const { return host_; }
  [[nodiscard]] std::vector<adapters::dbus::Action> recent() const { return {recent_.begin(), recent_.end()}; }

 private:
  adapters::dbus::HostSummary host_;
  std::deque<adapters::dbus::Action> recent_;
};

}  // namespace iommud::app
