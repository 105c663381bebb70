#include "app/daemon/hotplug_watch.hpp"

#include <chrono>
#include <utility>

#include "app/change/message_ids.hpp"

namespace iommud::app {

namespace sd = adapters::systemd;
using Clock = std::chrono::steady_clock;

core::Result<core::Done> HotplugWatch::start(sd::EventLoop& loop) {
  auto monitor = adapters::udev::Monitor::open({"pci", "net", "nvme", "block", "thunderbolt"});
  if (!monitor) return monitor.error();
  monitor_.emplace(std::move(monitor).value());
  auto watch = loop.readable(monitor_->fd(), [this] { received(); });
  if (!watch) return watch.error();
  watch_ = std::move(watch).value();
  auto timer = loop.timer([this] { debounced(); }, std::chrono::milliseconds(1));
  if (!timer) return timer.error();
  debounce_ = std::move(timer).value();
  return core::Done{};
}

void HotplugWatch::armDebounce() {
  if (auto next = filter_.nextDeadline()) {
    debounce_.at(*next);
  } else {
    debounce_.off();
  }
}

void HotplugWatch::received() {
  using Kind = adapters::udev::Received::Kind;
  bool overflowed = false;
  for (auto r = monitor_->receive(); r.kind == Kind::Event || r.kind == Kind::Overflow; r = monitor_->receive()) {
    if (r.kind == Kind::Event) event(r.event);
    overflowed = overflowed || r.kind == Kind::Overflow;
  }
  if (overflowed) lost();  // after the queue: the rescan reads what all of it left
}

void HotplugWatch::event(const adapters::udev::UEvent& e) {
  using Kind = HotplugFilter::Verdict::Kind;
  auto v = filter_.event(e, Clock::now(), stopping_);
  if (v.address.empty()) {
    if (e.subsystem == "thunderbolt") log_.debug("thunderbolt " + e.action + " " + e.sysname);
    return;  // virtual: loop, dm, veth
  }
  log_.debug(e.subsystem + " " + e.action + " " + e.sysname + " (" + v.address + ")" +
             (e.synthetic ? " (replayed)" : ""));
  switch (v.kind) {
    case Kind::Removed:
      hooks_.gone(v.address);
      armDebounce();
      hooks_.due();  // a fresh view: the D-Bus properties and the exports must not show it
      break;
    case Kind::LeftAlone:
      log_.debug("ignoring " + e.action + " of " + v.address + ": " + v.why + "; a re-plug or a reload acts again");
      break;
    case Kind::Pending: armDebounce(); break;
    case Kind::NotPci:
    case Kind::Stopping: break;
  }
}

// Which events were lost is unknown, so every PCI function present gets its policy again, in one
// batch.
void HotplugWatch::lost() {
  ++overflows_;
  auto present = root_.listDir("/sys/bus/pci/devices");
  std::string what;
  if (present) {
    for (const auto& a : filter_.resync(*present, Clock::now())) hooks_.gone(a);
    what = "rescanning the " + std::to_string(present->size()) + " PCI functions present";
  } else {  // the whole host, as at start
    hooks_.wholeHost();
    what = "rescanning the whole host (cannot list /sys/bus/pci/devices: " + present.error().describe() + ")";
  }
  log_.write({sd::Priority::Warning,
              std::string(msgid::kEventsLost),
              "udev monitor: its receive buffer overflowed and hotplug events were lost; " + what,
              {{"IOMMUD_OVERFLOWS", std::to_string(overflows_)}}});
  armDebounce();
  hooks_.due();
}

void HotplugWatch::debounced() {
  filter_.expire(Clock::now());
  armDebounce();
  hooks_.due();
}

}  // namespace iommud::app
