// The event loop adapter on a real sd-event loop: descriptors, signals and timers call back from
// run(), and an owner that goes takes its wait with it.
#include "adapters/systemd/event_loop.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <vector>

namespace event_loop_test {

namespace sd = iommud::adapters::systemd;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Fixture : ::testing::Test {
  sd::EventLoop loop = sd::EventLoop::create().value();
  sd::Timer bound;  // a test that waits for something that never comes fails instead of hanging
  sigset_t old{};
  void SetUp() override {
    sigprocmask(SIG_SETMASK, nullptr, &old);
    bound = loop.timer([this] { loop.exit(99); }, 1us).value();
    bound.at(Clock::now() + 60s);
  }
  void TearDown() override { sigprocmask(SIG_SETMASK, &old, nullptr); }
};

using EventLoop = Fixture;

TEST_F(EventLoop, ADescriptorThatBecomesReadableCallsBack) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  int calls = 0;
  auto watch = loop.readable(fds[0], [&] {
    char c = 0;
    ASSERT_EQ(read(fds[0], &c, 1), 1);
    EXPECT_EQ(c, 'x');
    ++calls;
    loop.exit(0);
  });
  ASSERT_TRUE(watch.ok());
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  EXPECT_EQ(loop.run(), 0);
  EXPECT_EQ(calls, 1);
  close(fds[0]);
  close(fds[1]);
}

TEST_F(EventLoop, AWatchThatIsGoneCallsNoMore) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  int calls = 0;
  auto watch = loop.readable(fds[0], [&] { ++calls; });
  ASSERT_TRUE(watch.ok());
  watch = sd::Watch{};  // its source goes with it
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  auto end = loop.timer([&] { loop.exit(0); }, 1us).value();
  end.at(Clock::now());  // due at once, after the pipe is readable
  EXPECT_EQ(loop.run(), 0);
  EXPECT_EQ(calls, 0);
  close(fds[0]);
  close(fds[1]);
}

TEST_F(EventLoop, SignalsAreBlockedAndCallBackWithTheirNumber) {
  std::vector<int> got;
  auto watch = loop.signals({SIGUSR1, SIGUSR2}, [&](int s) {
    got.push_back(s);
    if (got.size() == 2) loop.exit(0);
  });
  ASSERT_TRUE(watch.ok());
  sigset_t now;
  sigprocmask(SIG_SETMASK, nullptr, &now);
  EXPECT_TRUE(sigismember(&now, SIGUSR1));  // else the default action would end the test
  ASSERT_EQ(raise(SIGUSR2), 0);
  ASSERT_EQ(raise(SIGUSR1), 0);
  EXPECT_EQ(loop.run(), 0);
  ASSERT_EQ(got.size(), 2U);
  EXPECT_TRUE((got == std::vector<int>{SIGUSR1, SIGUSR2}) || (got == std::vector<int>{SIGUSR2, SIGUSR1}));
}

TEST_F(EventLoop, ATimerIsOffUntilArmedAndFiresOncePerArming) {
  int fired = 0;
  sd::Timer* self = nullptr;
  auto t = loop.timer(
      [&] {
        ++fired;
        EXPECT_FALSE(self->armed());  // one arming, one firing
        if (fired == 2) {
          loop.exit(0);
        } else {
          self->at(Clock::now() - 1s);  // a time past fires at once
        }
      },
      1us);
  ASSERT_TRUE(t.ok());
  self = &t.value();
  EXPECT_FALSE(self->armed());
  self->at(Clock::now());
  EXPECT_TRUE(self->armed());
  EXPECT_EQ(loop.run(), 0);
  EXPECT_EQ(fired, 2);
}

TEST_F(EventLoop, ATimerEveryPeriodStaysArmedUntilTurnedOff) {
  int fired = 0;
  sd::Timer* self = nullptr;
  auto end = loop.timer([&] { loop.exit(0); }, 1us).value();
  auto t = loop.timer(
      [&] {
        EXPECT_TRUE(self->armed());  // re-armed before its callback runs
        if (++fired == 3) {
          self->off();
          end.at(Clock::now());
        }
      },
      1us);
  ASSERT_TRUE(t.ok());
  self = &t.value();
  self->every(1ms);
  EXPECT_EQ(loop.run(), 0);
  EXPECT_EQ(fired, 3);
  EXPECT_FALSE(self->armed());
}

TEST_F(EventLoop, AMovedTimerStillCallsBack) {
  int fired = 0;
  auto made = loop.timer(
      [&] {
        ++fired;
        loop.exit(0);
      },
      1us);
  ASSERT_TRUE(made.ok());
  sd::Timer moved = std::move(made).value();
  moved.at(Clock::now());
  EXPECT_EQ(loop.run(), 0);
  EXPECT_EQ(fired, 1);
}

}  // namespace event_loop_test
