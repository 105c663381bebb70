#include "adapters/udev/monitor.hpp"

#include <libudev.h>

#include <cerrno>
#include <utility>

namespace iommud::adapters::udev {

namespace {

std::string text(const char* s) {
  return s == nullptr ? std::string() : std::string(s);
}

}  // namespace

Received::Kind receiveErrorKind(int err) {
  switch (err) {
    case EAGAIN: return Received::Kind::Drained;
    // The kernel dropped messages for want of room and says so once, at the next recvmsg(),
    // before the messages still queued (docs/kernel.md §12).
    case ENOBUFS: return Received::Kind::Overflow;
    default: return Received::Kind::Unreadable;
  }
}

core::Result<Monitor> Monitor::open(const std::vector<std::string>& subsystems) {
  struct ::udev* u = udev_new();
  if (u == nullptr) return core::Error{errno, "", "cannot create a udev context"};
  struct ::udev_monitor* m = udev_monitor_new_from_netlink(u, "udev");
  Monitor monitor(u, m);  // owns both from here on
  if (m == nullptr) return core::Error{errno, "", "cannot open the udev monitor"};
  for (const auto& s : subsystems) {
    if (int r = udev_monitor_filter_add_match_subsystem_devtype(m, s.c_str(), nullptr); r < 0) {
      return core::Error{-r, "", "cannot filter the udev monitor on " + s};
    }
  }
  // A burst of hotplug events (a Thunderbolt dock) must not overflow the socket while the loop
  // is busy: ask for a large buffer (needs CAP_NET_ADMIN; the default stays otherwise).
  (void)udev_monitor_set_receive_buffer_size(m, 16 * 1024 * 1024);
  if (int r = udev_monitor_enable_receiving(m); r < 0) {
    return core::Error{-r, "", "cannot start the udev monitor"};
  }
  return monitor;
}

Monitor::Monitor(Monitor&& other) noexcept
    : udev_(std::exchange(other.udev_, nullptr)), monitor_(std::exchange(other.monitor_, nullptr)) {}

Monitor& Monitor::operator=(Monitor&& other) noexcept {
  if (this != &other) {
    std::swap(udev_, other.udev_);
    std::swap(monitor_, other.monitor_);
  }
  return *this;
}

Monitor::~Monitor() {
  if (monitor_ != nullptr) udev_monitor_unref(monitor_);
  if (udev_ != nullptr) udev_unref(udev_);
}

int Monitor::fd() const {
  return udev_monitor_get_fd(monitor_);
}

Received Monitor::receive() {
  errno = 0;
  struct ::udev_device* d = udev_monitor_receive_device(monitor_);
  if (d == nullptr) {
    const int err = errno;
    return {receiveErrorKind(err), {}, err};
  }
  UEvent e{text(udev_device_get_action(d)), text(udev_device_get_subsystem(d)), text(udev_device_get_devpath(d)),
           text(udev_device_get_sysname(d)), udev_device_get_property_value(d, "SYNTH_UUID") != nullptr};
  udev_device_unref(d);
  return {Received::Kind::Event, std::move(e), 0};
}

}  // namespace iommud::adapters::udev
