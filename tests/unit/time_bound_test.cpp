#include "app/time_bound.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "support/stderr_capture.hpp"

using namespace iommud;
using Clock = std::chrono::steady_clock;

namespace {

adapters::systemd::Log quietLog() {
  return adapters::systemd::Log(adapters::systemd::Log::Target::Stderr);
}

}  // namespace

TEST(RunWithin, ReturnsTheExitCodeOfWorkThatEndsInTime) {
  EXPECT_EQ(app::runWithin(
                std::chrono::seconds(10), [] { return 78; }, quietLog()),
            78);
  EXPECT_EQ(app::runWithin(
                std::chrono::seconds(10), [] { return 0; }, quietLog()),
            0);
}

TEST(RunWithin, StopsWaitingAtTheLimitAndLeavesTheWorkToFinish) {
  auto dir = std::filesystem::temp_directory_path() / ("iommud-time-bound-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto done = dir / "done";
  int code = 0;
  auto start = Clock::now();
  auto err = iommud::testing::capturedStderr([&](const std::string&) {
    code = app::runWithin(
        std::chrono::milliseconds(200),
        [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(700));
          std::FILE* f = std::fopen(done.c_str(), "w");
          if (f != nullptr) std::fclose(f);
          return 0;
        },
        quietLog());
  });
  auto waited = Clock::now() - start;
  EXPECT_EQ(code, app::kExitStillRunning);
  EXPECT_LT(waited, std::chrono::milliseconds(600));
  EXPECT_NE(err.find("still working after"), std::string::npos) << err;
  // Not killed: the work finishes on its own.
  for (int i = 0; i < 100 && !std::filesystem::exists(done); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(std::filesystem::exists(done));
  std::filesystem::remove_all(dir);
}
