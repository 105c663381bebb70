#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"

struct udev;
struct udev_monitor;

namespace iommud::adapters::udev {

/// One uevent, as udev passes it on after its rules ran.
struct UEvent {
  std::string action;     // add, remove, change, move, bind, unbind
  std::string subsystem;  // pci, net, nvme, block, thunderbolt
  std::string devpath;    // "/devices/pci0000:00/0000:00:1c.0/0000:05:00.0/net/enp5s0"
  std::string sysname;    // "enp5s0"
  /// Replayed by a write to the device's `uevent` file (`udevadm trigger`, udev's coldplug at
  /// boot), not caused by the kernel's own hotplug: the kernel adds SYNTH_UUID to those.
  bool synthetic = false;
};

/// libudev's monitor on the "udev" source, filtered to the given subsystems in the kernel (BPF).
class Monitor {
 public:
  static core::Result<Monitor> open(const std::vector<std::string>& subsystems);
  Monitor(Monitor&&) noexcept;
  Monitor& operator=(Monitor&&) noexcept;
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;
  ~Monitor();

  /// The non-blocking socket to poll for input.
  [[nodiscard]] int fd() const;
  /// The next queued event; nullopt when none is waiting.
  std::optional<UEvent> receive();

 private:
  Monitor(struct ::udev* udev, struct ::udev_monitor* monitor) : udev_(udev), monitor_(monitor) {}
  struct ::udev* udev_ = nullptr;
  struct ::udev_monitor* monitor_ = nullptr;
};

}  // namespace iommud::adapters::udev
