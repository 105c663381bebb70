#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "adapters/sysfs/root.hpp"
#include "adapters/systemd/event_loop.hpp"
#include "adapters/systemd/log.hpp"
#include "adapters/udev/monitor.hpp"
#include "app/daemon/hotplug_filter.hpp"
#include "core/result.hpp"

namespace iommud::app {

/// The daemon's hotplug events: the udev monitor on the loop, each event through the HotplugFilter
/// (pure: the daemon shares it, as the worker's reports feed it too), the one debounce timer at
/// the filter's next deadline, and the rescan after the monitor's socket overflowed (docs/kernel.md
/// §12). What the daemon acts on comes out through its hooks.
class HotplugWatch {
 public:
  struct Hooks {
    std::function<void(const std::string& address)> gone;  // a PCI function went: forget what was known
    std::function<void()> due;                             // a batch may be due, or a view stale: work next
    std::function<void()> wholeHost;                       // events lost and the devices cannot be listed
  };
  HotplugWatch(const adapters::sysfs::Root& root, HotplugFilter& filter, const adapters::systemd::Log& log, Hooks hooks)
      : root_(root), filter_(filter), log_(log), hooks_(std::move(hooks)) {}

  /// Opens the monitor (pci net nvme block thunderbolt) and watches it and the debounce timer on `loop`.
  core::Result<core::Done> start(adapters::systemd::EventLoop& loop);
  /// In a forked child (the worker): closes the child's copy of the monitor. The loop's source is
  /// left as it is: sd-event refuses a forked child, and the child never runs the loop.
  void closeInChild() { monitor_.reset(); }
  /// From now on the filter is told the daemon stops: nothing new is queued.
  void stopping() { stopping_ = true; }
  /// One timer, at the end of the earliest pending debounce.
  void armDebounce();

 private:
  void received();
  void event(const adapters::udev::UEvent& e);
  void lost();
  void debounced();

  const adapters::sysfs::Root& root_;
  HotplugFilter& filter_;
  const adapters::systemd::Log& log_;
  Hooks hooks_;
  std::optional<adapters::udev::Monitor> monitor_;
  adapters::systemd::Watch watch_;
  adapters::systemd::Timer debounce_;
  uint64_t overflows_ = 0;  // of the monitor's socket
  bool stopping_ = false;
};

}  // namespace iommud::app
