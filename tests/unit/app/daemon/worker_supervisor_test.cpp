// The worker supervisor on a real event loop with a real worker process: what it hands the daemon
// when the work ends, and when the worker dies under it (the WorkQueue decides what comes next).
#include "app/daemon/worker_supervisor.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <vector>

#include "support/worker_exit.hpp"

namespace worker_supervisor_test {

namespace app = iommud::app;
namespace sd = iommud::adapters::systemd;
using namespace std::chrono_literals;

app::WorkerRequest batchOf(const std::string& address) {
  app::WorkerRequest w;
  w.batch.hot = {address};
  return w;
}

struct Fixture : ::testing::Test {
  sd::EventLoop loop = sd::EventLoop::create().value();
  sd::Timer bound;  // a test that waits for something that never comes fails instead of hanging
  sd::Log log{sd::Log::Target::Stderr};
  app::WorkerSupervisor::Queue queue;
  app::HotplugFilter filter{1ms};
  struct Ended {
    app::WorkerRequest work;
    app::WorkerReport report;
  };
  std::vector<Ended> ended;
  int freed = 0;
  std::optional<app::WorkerSupervisor> supervisor;
  sigset_t old{};

  // In the worker: a report that names the batch's first device; "die" is killed mid-work, "exit"
  // exits right after its report.
  static std::optional<app::WorkerReport> run(const app::WorkerRequest& w) {
    if (w.kind == app::WorkerRequest::Kind::Recover) return app::WorkerReport{};
    if (!w.batch.hot.empty() && w.batch.hot.front() == "die") raise(SIGKILL);
    app::WorkerReport r;
    r.devices.push_back({app::DeviceNews::Tuned, w.batch.hot.empty() ? "" : w.batch.hot.front(), "id"});
    if (!w.batch.hot.empty() && w.batch.hot.front() == "exit") iommud::testing::replyAndExit(app::encodeReport(r));
    return r;
  }

  void SetUp() override {
    sigprocmask(SIG_SETMASK, nullptr, &old);
    bound = loop.timer([this] { loop.exit(99); }, 1us).value();
    bound.at(std::chrono::steady_clock::now() + 60s);
    supervisor.emplace(
        loop, log, queue,
        app::WorkerSupervisor::Hooks{.atStart = [] {},
                                     .run = run,
                                     .ended =
                                         [this](const app::WorkerRequest& w, const app::WorkerReport& r) {
                                           ended.push_back({w, r});
                                           next();
                                         },
                                     .free =
                                         [this] {
                                           ++freed;
                                           next();
                                         }});
  }
  void TearDown() override {
    supervisor.reset();
    sigprocmask(SIG_SETMASK, &old, nullptr);
  }

  // As the daemon does: the queue's next work, or the end of the loop when there is none.
  void next() {
    auto n = queue.next(filter, false, false);
    if (!n) {
      loop.exit(0);
      return;
    }
    ASSERT_TRUE(supervisor->start(std::move(n->work), std::nullopt));
  }
};

using WorkerSupervisor = Fixture;

TEST_F(WorkerSupervisor, AReportComesBackWithTheWorkItEnded) {
  ASSERT_TRUE(supervisor->start(batchOf("0000:01:00.0"), std::nullopt));
  EXPECT_TRUE(supervisor->busy());
  EXPECT_EQ(app::describe(supervisor->current()), "0000:01:00.0");
  EXPECT_EQ(loop.run(), 0);
  ASSERT_EQ(ended.size(), 1U);
  EXPECT_EQ(ended[0].work, batchOf("0000:01:00.0"));
  ASSERT_EQ(ended[0].report.devices.size(), 1U);
  EXPECT_EQ(ended[0].report.devices[0].address, "0000:01:00.0");
  EXPECT_TRUE(ended[0].report.complete);
  EXPECT_FALSE(supervisor->busy());
  EXPECT_EQ(app::describe(supervisor->current()), "the whole host");  // nothing under way
}

TEST_F(WorkerSupervisor, AWorkerKilledMidWorkIsReplacedWhichRecoversThenTheWorkIsDoneOnceMore) {
  ASSERT_TRUE(supervisor->start(batchOf("die"), std::nullopt));
  EXPECT_EQ(loop.run(), 0);
  // The death ends nothing: a new worker recovers, then does the same batch, which dies again and
  // is then ended, cut short, rather than tried over and over; the next worker recovers again.
  EXPECT_EQ(freed, 1);
  ASSERT_EQ(ended.size(), 3U);
  EXPECT_EQ(ended[0].work.kind, app::WorkerRequest::Kind::Recover);
  EXPECT_TRUE(ended[0].report.complete);
  EXPECT_EQ(ended[1].work, batchOf("die"));
  EXPECT_FALSE(ended[1].report.complete);
  EXPECT_EQ(ended[2].work.kind, app::WorkerRequest::Kind::Recover);
  EXPECT_FALSE(supervisor->busy());
}

// The race of a worker that dies right after its report, made to happen every time: the work
// ended in full, a new worker recovers first, and the work that comes next (the whole host) goes
// to it, done once, not taken for work the dead worker died in.
TEST_F(WorkerSupervisor, AWorkerThatExitsRightAfterItsReportEndsItsWorkAndTheNextGoesToANewOne) {
  queue.wholeHost();  // what comes next
  ASSERT_TRUE(supervisor->start(batchOf("exit"), std::nullopt));
  // Dead, and not reaped, before the loop sees its report or its death. This worker, by its pid:
  // any child would do it too soon when an earlier test's is there to be reaped (it was, in the
  // whole run of the unit tests, and the loop then saw the report while the worker still lived).
  const pid_t worker = supervisor->workerPid();
  ASSERT_GT(worker, 0);
  siginfo_t si{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(worker), &si, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(loop.run(), 0);
  EXPECT_EQ(freed, 0);  // no work was cut short
  ASSERT_EQ(ended.size(), 3U);
  EXPECT_EQ(ended[0].work, batchOf("exit"));
  EXPECT_TRUE(ended[0].report.complete);
  EXPECT_EQ(ended[1].work.kind, app::WorkerRequest::Kind::Recover);
  EXPECT_TRUE(ended[2].work.batch.whole());
  EXPECT_TRUE(ended[2].report.complete);
}

}  // namespace worker_supervisor_test
