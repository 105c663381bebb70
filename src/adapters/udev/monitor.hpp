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

/// What one receive found. Events lost to a full socket buffer are news of their own, not an
/// empty queue: whoever listens must then read the world afresh (docs/kernel.md §12).
struct Received {
  enum class Kind {
    Event,       // `event` holds the next uevent
    Drained,     // nothing is waiting (EAGAIN)
    Overflow,    // the socket's receive buffer ran full and the kernel dropped events (ENOBUFS)
    Unreadable,  // a message libudev refused (not udev's, malformed) or another error: `error`
  };
  Kind kind = Kind::Drained;
  UEvent event;
  int error = 0;  // the errno, for Overflow and Unreadable
};

/// How libudev's NULL from udev_monitor_receive_device() with `errno` reads.
Received::Kind receiveErrorKind(int err);

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
  /// The next queued event, or why there is none.
  Received receive();

 private:
  Monitor(struct ::udev* udev, struct ::udev_monitor* monitor) : udev_(udev), monitor_(monitor) {}
  struct ::udev* udev_ = nullptr;
  struct ::udev_monitor* monitor_ = nullptr;
};

}  // namespace iommud::adapters::udev
