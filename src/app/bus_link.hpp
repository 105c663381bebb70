#pragma once

#include "adapters/dbus/manager_service.hpp"
#include "adapters/systemd/log.hpp"

namespace iommud::app {

/// What the daemon logs when its connection to the system bus goes and comes back (pure).
adapters::systemd::Entry busLinkEntry(const adapters::dbus::BusLinkEvent& e);

}  // namespace iommud::app
