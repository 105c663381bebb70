// The worker supervisor on a real sd-event loop with real children, without the daemon.
#include "adapters/systemd/worker_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <csignal>
#include <optional>

namespace sd = iommud::adapters::systemd;

namespace {

// A loop with SIGCHLD blocked (sd_event_add_child needs it), as the daemon runs it.
struct Loop {
  sd_event* event = nullptr;
  sigset_t old{};
  Loop() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, &old);
    sd_event_new(&event);
  }
  ~Loop() {
    sd_event_unref(event);
    sigprocmask(SIG_SETMASK, &old, nullptr);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
};

std::optional<sd::WorkerProcess::Exit> runOne(const std::function<sd::WorkerProcess::Result()>& work) {
  Loop loop;
  std::optional<sd::WorkerProcess::Exit> exit;
  sd::WorkerProcess worker(loop.event, [&](sd::WorkerProcess::Exit e) {
    exit = std::move(e);
    sd_event_exit(loop.event, 0);
  });
  // A bound, not a wait: a parent that stopped reading would leave the child blocked for ever.
  sd_event_source* bound = nullptr;
  sd_event_add_time_relative(
      loop.event, &bound, CLOCK_MONOTONIC, 60'000'000, 0,
      [](sd_event_source*, uint64_t, void* e) { return sd_event_exit(static_cast<sd_event*>(e), 1); }, loop.event);
  auto started = worker.start(work);
  EXPECT_TRUE(started) << started.error().describe();
  EXPECT_TRUE(worker.running());
  EXPECT_EQ(sd_event_loop(loop.event), 0);
  sd_event_source_unref(bound);
  return exit;
}

}  // namespace

TEST(WorkerProcess, ReportsTheChildsExitCodeWithAllItWroteMoreThanAPipeHolds) {
  const std::string big(3 << 20, 'x');  // larger than a pipe's buffer: read while the child writes
  auto exit = runOne([&] { return sd::WorkerProcess::Result{big + "end", 3}; });
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->status, 3);
  EXPECT_EQ(exit->output.size(), big.size() + 3);
  EXPECT_TRUE(exit->output.ends_with("end"));
}

TEST(WorkerProcess, AChildKilledMidWorkIsReportedAsKilled) {
  auto exit = runOne([] {
    raise(SIGKILL);
    return sd::WorkerProcess::Result{"never written", 0};
  });
  ASSERT_TRUE(exit);
  EXPECT_FALSE(exit->exited);
  EXPECT_EQ(exit->status, SIGKILL);
  EXPECT_TRUE(exit->output.empty());
}

TEST(WorkerProcess, FdClosesWhatItOwnsOnce) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    sd::Fd r(fds[0]);
    sd::Fd w(fds[1]);
    sd::Fd moved(std::move(w));
    EXPECT_EQ(w.get(), -1);  // NOLINT(bugprone-use-after-move): the moved-from owner holds nothing
    EXPECT_EQ(moved.get(), fds[1]);
  }
  EXPECT_EQ(fcntl(fds[0], F_GETFD), -1);
  EXPECT_EQ(fcntl(fds[1], F_GETFD), -1);
}
