#include "app/daemon/work_queue.hpp"

#include <gtest/gtest.h>

namespace work_queue_test {

namespace app = iommud::app;
using Kind = app::WorkerRequest::Kind;
using Queue = app::WorkQueue<int>;
using After = Queue::AfterDeath;

// A filter with `address` queued, as a plug's debounce leaves it.
void plug(app::HotplugFilter& f, const std::string& address) {
  iommud::adapters::udev::UEvent e;
  e.action = "add";
  e.subsystem = "pci";
  e.devpath = "/devices/pci0000:00/" + address;
  e.sysname = address;
  const auto now = std::chrono::steady_clock::now();
  f.event(e, now, false);
  f.expire(now + std::chrono::seconds(1));
}

TEST(WorkQueue, TheWholeHostThenDevicesThenCallsThenAView) {
  Queue q;
  app::HotplugFilter f(std::chrono::milliseconds(1));
  EXPECT_FALSE(q.next(f, true, false));
  q.viewStale();
  q.call({app::WorkerCall::Kind::Apply, false, "nvme0"}, 7, 0);
  plug(f, "0000:02:00.0");
  ASSERT_TRUE(f.hasQueued());
  auto devices = q.next(f, true, false);
  ASSERT_TRUE(devices);
  EXPECT_EQ(devices->work.kind, Kind::Batch);
  EXPECT_EQ(devices->work.batch.hot, std::vector<std::string>{"0000:02:00.0"});
  q.wholeHost();
  plug(f, "0000:03:00.0");
  auto whole = q.next(f, true, false);
  ASSERT_TRUE(whole);
  EXPECT_TRUE(whole->work.batch.whole());
  EXPECT_FALSE(f.hasQueued());  // part of the whole host
  auto call = q.next(f, true, false);
  ASSERT_TRUE(call && call->reply);
  EXPECT_EQ(call->work.kind, Kind::Call);
  EXPECT_EQ(*call->reply, 7);
  EXPECT_FALSE(q.next(f, false, false));  // nobody wants the view
  auto view = q.next(f, true, false);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->work.kind, Kind::View);
  EXPECT_FALSE(q.next(f, true, false));
}

TEST(WorkQueue, AWorkerThatDiesIsFollowedByARecoveryThenItsWorkOnceMore) {
  Queue q;
  app::HotplugFilter f(std::chrono::milliseconds(1));
  app::WorkerRequest batch;
  batch.batch.hot = {"0000:02:00.0"};
  EXPECT_EQ(q.died(batch), After::Again);
  EXPECT_TRUE(q.recovering());
  q.wholeHost();  // waits behind both
  EXPECT_EQ(q.next(f, false, false)->work.kind, Kind::Recover);
  EXPECT_EQ(q.next(f, false, false)->work, batch);
  // It kills the next worker too: dropped, and recovered after.
  EXPECT_EQ(q.died(batch), After::Dropped);
  EXPECT_EQ(q.next(f, false, false)->work.kind, Kind::Recover);
  // The recovery kills its worker: left to the next start, not tried again.
  app::WorkerRequest recover;
  recover.kind = Kind::Recover;
  EXPECT_EQ(q.died(recover), After::LeftToNextStart);
  EXPECT_FALSE(q.recovering());
  EXPECT_TRUE(q.next(f, false, false)->work.batch.whole());
}

TEST(WorkQueue, ACallIsNotDoneTwiceAndStoppingLeavesOnlyTheRecovery) {
  Queue q;
  app::HotplugFilter f(std::chrono::milliseconds(1));
  app::WorkerRequest call;
  call.kind = Kind::Call;
  EXPECT_EQ(q.died(call), After::Dropped);
  q.wholeHost();
  auto next = q.next(f, false, true);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->work.kind, Kind::Recover);
  EXPECT_FALSE(q.next(f, false, true));  // the whole host waits for a start that is not coming
  EXPECT_FALSE(q.died(std::nullopt));    // died idle: a recovery all the same
  EXPECT_TRUE(q.recovering());
}

// Plans (anyone may ask) have a bound of their own, so that they cannot crowd out root's Apply and
// Revert, and a bound per user, so that one user cannot keep every other user's Plan refused.
TEST(WorkQueue, PlansHaveABoundOfTheirOwnAndOneUserCannotTakeItAll) {
  Queue q;
  const app::WorkerCall plan{app::WorkerCall::Kind::Plan, false, ""};
  const app::WorkerCall apply{app::WorkerCall::Kind::Apply, false, ""};
  constexpr uint32_t mallory = 1000;
  for (size_t i = 0; i < Queue::kMaxWaitingPlansPerCaller; ++i) {
    ASSERT_FALSE(q.refused(plan, mallory));
    q.call(plan, static_cast<int>(i), mallory);
  }
  EXPECT_EQ(q.refused(plan, mallory), "2 plans of this user are waiting already; try when they are answered");
  EXPECT_FALSE(q.refused(plan, 1001));  // another user's still waits
  uint32_t user = 2000;
  for (size_t i = Queue::kMaxWaitingPlansPerCaller; i < Queue::kMaxWaitingPlans; ++i) {
    ASSERT_FALSE(q.refused(plan, user)) << i;
    q.call(plan, static_cast<int>(i), user);
    if (i % Queue::kMaxWaitingPlansPerCaller == 1) ++user;
  }
  EXPECT_EQ(q.refused(plan, 3000), "16 such calls are waiting already; try later");
  EXPECT_FALSE(q.refused(apply, 0));  // root's calls are not crowded out
  for (size_t i = 0; i < Queue::kMaxWaitingCalls; ++i) q.call(apply, 0, 0);
  EXPECT_TRUE(q.refused(apply, 0));
  EXPECT_EQ(q.dropCalls().size(), Queue::kMaxWaitingPlans + Queue::kMaxWaitingCalls);
  EXPECT_FALSE(q.refused(plan, mallory));
}

// A piece of work that brought a view read after the view went stale leaves no View to do.
TEST(WorkQueue, AViewThatCameWithTheWorkLeavesNoViewToDo) {
  Queue q;
  app::HotplugFilter f(std::chrono::milliseconds(1));
  q.viewStale();
  q.viewFresh();
  EXPECT_FALSE(q.next(f, true, false));
  q.viewStale();
  auto view = q.next(f, true, false);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->work.kind, Kind::View);
}

}  // namespace work_queue_test
