#include "app/bus_link.hpp"

#include <string>

namespace iommud::app {

adapters::systemd::Entry busLinkEntry(const adapters::dbus::BusLinkEvent& e) {
  using Kind = adapters::dbus::BusLinkEvent::Kind;
  using adapters::systemd::Priority;
  const std::string name = adapters::dbus::kBusName;
  switch (e.kind) {
    case Kind::Lost:
      return {Priority::Warning,
              {},
              "the system bus closed iommud's connection (dbus-daemon restarted or stopped): no D-Bus API until "
              "it is back; policies and hotplug go on, reconnecting",
              {}};
    case Kind::Retrying:
      return {Priority::Debug,
              {},
              "reconnection " + std::to_string(e.attempt) + " to the system bus failed (" + e.error + "), next in " +
                  std::to_string(e.delay.count()) + " ms",
              {}};
    case Kind::Restored:
      return {Priority::Notice,
              {},
              "back on the system bus after " + std::to_string(e.attempt) + " attempt" + (e.attempt == 1 ? "" : "s") +
                  ": " + name + " asked for again",
              {}};
  }
  return {Priority::Info, {}, "system bus", {}};
}

}  // namespace iommud::app
