#pragma once

#include <string>

namespace iommud::adapters::systemd {

/// Tells the service manager `state` ("READY=1\nSTATUS=...", sd_notify(3)'s assignments, one per
/// line) over $NOTIFY_SOCKET; nothing without one (not started by systemd, or not Type=notify).
void notify(const std::string& state);

}  // namespace iommud::adapters::systemd
