#include "app/daemon/time_bound.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

#include "support/stderr_capture.hpp"

namespace time_bound_test {

using namespace iommud;

adapters::systemd::Log quietLog() {
  return adapters::systemd::Log(adapters::systemd::Log::Target::Stderr);
}

TEST(RunWithin, ReturnsTheExitCodeOfWorkThatEndsInTime) {
  EXPECT_EQ(app::runWithin(
                std::chrono::seconds(10), [] { return 78; }, quietLog()),
            78);
  EXPECT_EQ(app::runWithin(
                std::chrono::seconds(10), [] { return 0; }, quietLog()),
            0);
}

TEST(RunWithin, StopsWaitingAtTheLimitAndLeavesTheWorkToFinish) {
  // The work cannot end before the test lets it (it reads `go`), so runWithin can only come back
  // by giving up at its limit, however loaded the machine is; it then finishes once let go (it
  // writes `done`), which shows it was not killed. No clock is read here.
  int go[2];
  int done[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(done, O_CLOEXEC), 0);
  int code = 0;
  auto err = iommud::testing::capturedStderr([&](const std::string&) {
    code = app::runWithin(
        std::chrono::milliseconds(200),
        [&] {
          char c = 0;
          if (::read(go[0], &c, 1) != 1) return 1;
          return ::write(done[1], "x", 1) == 1 ? 0 : 1;
        },
        quietLog());
  });
  ::close(go[0]);
  ::close(done[1]);  // the work's copy stays open until it ends
  EXPECT_EQ(code, app::kExitStillRunning);
  EXPECT_NE(err.find("still working after"), std::string::npos) << err;
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  ::close(go[1]);
  char c = 0;
  EXPECT_EQ(::read(done[0], &c, 1), 1) << "the work was killed instead of left to finish";
  ::close(done[0]);
}

}  // namespace time_bound_test
