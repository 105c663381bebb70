#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>

#include "adapters/systemd/owners.hpp"
#include "core/result.hpp"

struct sd_event;

// The daemon's one event loop (sd-event), behind a small interface: the app layer names what it
// waits for (a readable descriptor, signals, a time) and gets an owner that stops the wait when it
// goes. Only this adapter and the others in adapters/ see <systemd/sd-event.h>.

namespace iommud::adapters::systemd {

/// What the loop calls back, kept where the loop's source can point at it: the callback and its
/// sources go together, with their owner.
struct Callbacks;

/// A descriptor or signals the loop watches, until this owner goes. Empty: watching nothing.
class Watch {
 public:
  Watch();
  Watch(Watch&&) noexcept;
  Watch& operator=(Watch&&) noexcept;
  ~Watch();

 private:
  friend class EventLoop;
  std::unique_ptr<Callbacks> state_;
};

/// A timer on CLOCK_MONOTONIC (std::chrono::steady_clock's clock), off until armed; it fires
/// once per arming, or, with every(), each period after the last time it was due (no drift).
class Timer {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  Timer();
  Timer(Timer&&) noexcept;
  Timer& operator=(Timer&&) noexcept;
  ~Timer();

  /// Fires once at `when` (at once if it has passed), instead of whatever was armed.
  void at(TimePoint when);
  /// Fires every `period`, the first time one period from now.
  void every(std::chrono::microseconds period);
  void off();
  [[nodiscard]] bool armed() const;

 private:
  friend class EventLoop;
  std::unique_ptr<Callbacks> state_;
};

class EventLoop {
 public:
  static core::Result<EventLoop> create();
  EventLoop(EventLoop&&) noexcept;
  EventLoop& operator=(EventLoop&&) noexcept;
  ~EventLoop();

  /// For the adapters that add their own sources (the D-Bus connection, the standing worker).
  [[nodiscard]] sd_event* get() const { return event_; }

  /// `ready` is called from the loop whenever `fd` is readable.
  core::Result<Watch> readable(int fd, std::function<void()> ready);
  /// Blocks the signals (for the whole process, as signalfd needs) and calls `got` with each.
  core::Result<Watch> signals(std::initializer_list<int> signos, std::function<void(int)> got);
  /// `fired` is called from the loop when the timer is due; `accuracy` is how late it may be,
  /// to let the loop wake for several at once (0: sd-event's default, 250 ms).
  core::Result<Timer> timer(std::function<void()> fired, std::chrono::microseconds accuracy);

  /// Sends WATCHDOG=1 at half of $WATCHDOG_USEC when the service manager asks for it.
  void watchdog();
  /// Dispatches until exit(); the code given to exit(), or an errno (negative) if the loop failed.
  int run();
  void exit(int code);

 private:
  explicit EventLoop(sd_event* e) : event_(e) {}
  sd_event* event_ = nullptr;
};

}  // namespace iommud::adapters::systemd
