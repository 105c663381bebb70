#include "adapters/systemd/event_loop.hpp"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <systemd/sd-event.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace iommud::adapters::systemd {

struct Callbacks {
  std::function<void()> ready;   // a readable descriptor, a timer
  std::function<void(int)> got;  // signals
  std::vector<EventSource> sources;
  uint64_t periodUsec = 0;  // a timer's, with every()
};

namespace {

core::Error loopError(const std::string& what, int r) {
  return core::Error{-r, "", what + ": " + std::strerror(-r)};
}

uint64_t usecOf(std::chrono::steady_clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

int onReadable(sd_event_source* /*s*/, int /*fd*/, uint32_t /*revents*/, void* self) {
  static_cast<Callbacks*>(self)->ready();
  return 0;
}

int onSignal(sd_event_source* /*s*/, const struct signalfd_siginfo* si, void* self) {
  static_cast<Callbacks*>(self)->got(static_cast<int>(si->ssi_signo));
  return 0;
}

int onTime(sd_event_source* s, uint64_t usec, void* self) {
  auto* c = static_cast<Callbacks*>(self);
  if (c->periodUsec != 0) {  // due again one period after it was due now, however late this runs
    (void)sd_event_source_set_time(s, usec + c->periodUsec);
    (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
  }
  c->ready();
  return 0;
}

}  // namespace

Watch::Watch() = default;
Watch::Watch(Watch&&) noexcept = default;
Watch& Watch::operator=(Watch&&) noexcept = default;
Watch::~Watch() = default;

Timer::Timer() = default;
Timer::Timer(Timer&&) noexcept = default;
Timer& Timer::operator=(Timer&&) noexcept = default;
Timer::~Timer() = default;

void Timer::at(TimePoint when) {
  if (!state_) return;
  state_->periodUsec = 0;
  auto* s = state_->sources.front().get();
  (void)sd_event_source_set_time(s, usecOf(when));
  (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

void Timer::every(std::chrono::microseconds period) {
  if (!state_) return;
  state_->periodUsec = static_cast<uint64_t>(period.count());
  auto* s = state_->sources.front().get();
  (void)sd_event_source_set_time_relative(s, state_->periodUsec);
  (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

void Timer::off() {
  if (!state_) return;
  (void)sd_event_source_set_enabled(state_->sources.front().get(), SD_EVENT_OFF);
}

bool Timer::armed() const {
  int enabled = SD_EVENT_OFF;
  return state_ && sd_event_source_get_enabled(state_->sources.front().get(), &enabled) >= 0 && enabled != SD_EVENT_OFF;
}

core::Result<EventLoop> EventLoop::create() {
  sd_event* e = nullptr;
  if (int r = sd_event_new(&e); r < 0) return loopError("cannot create the event loop", r);
  return EventLoop(e);
}

EventLoop::EventLoop(EventLoop&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}

EventLoop& EventLoop::operator=(EventLoop&& o) noexcept {
  if (this != &o) {
    sd_event_unref(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

// Every source holds a reference to its loop: one whose owner outlives this is still valid.
EventLoop::~EventLoop() {
  sd_event_unref(event_);
}

core::Result<Watch> EventLoop::readable(int fd, std::function<void()> ready) {
  Watch w;
  w.state_ = std::make_unique<Callbacks>();
  w.state_->ready = std::move(ready);
  sd_event_source* s = nullptr;
  if (int r = sd_event_add_io(event_, &s, fd, EPOLLIN, onReadable, w.state_.get()); r < 0) {
    return loopError("cannot watch descriptor " + std::to_string(fd), r);
  }
  w.state_->sources.emplace_back(s);
  return w;
}

core::Result<Watch> EventLoop::signals(std::initializer_list<int> signos, std::function<void(int)> got) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : signos) sigaddset(&mask, s);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return loopError("cannot block signals", -errno);
  Watch w;
  w.state_ = std::make_unique<Callbacks>();
  w.state_->got = std::move(got);
  for (int signo : signos) {
    sd_event_source* s = nullptr;
    if (int r = sd_event_add_signal(event_, &s, signo, onSignal, w.state_.get()); r < 0) {
      return loopError("cannot watch signal " + std::to_string(signo), r);
    }
    w.state_->sources.emplace_back(s);
  }
  return w;
}

core::Result<Timer> EventLoop::timer(std::function<void()> fired, std::chrono::microseconds accuracy) {
  Timer t;
  t.state_ = std::make_unique<Callbacks>();
  t.state_->ready = std::move(fired);
  sd_event_source* s = nullptr;
  if (int r = sd_event_add_time(event_, &s, CLOCK_MONOTONIC, 0, static_cast<uint64_t>(accuracy.count()), onTime,
                                t.state_.get());
      r < 0) {
    return loopError("cannot add a timer", r);
  }
  t.state_->sources.emplace_back(s);
  (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);  // until armed
  return t;
}

void EventLoop::watchdog() {
  (void)sd_event_set_watchdog(event_, 1);
}

int EventLoop::run() {
  return sd_event_loop(event_);
}

void EventLoop::exit(int code) {
  (void)sd_event_exit(event_, code);
}

}  // namespace iommud::adapters::systemd
