#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/daemon/hotplug_filter.hpp"
#include "app/worker/worker_report.hpp"

namespace iommud::app {

/// What the daemon's worker does next, and what becomes of the work a worker died in (pure; the
/// caller sends the request and keeps the replies). Most urgent first: the recovery after a worker
/// died, the work it died in (once more), the whole host (start, reload), the devices the hotplug
/// filter queued, D-Bus calls in their order, then a fresh view of the host. `Reply` is how a
/// D-Bus caller is answered (the bus's PendingCall; anything in tests).
template <class Reply>
class WorkQueue {
 public:
  /// At most this many Apply/Revert calls waiting, and Plans (anyone's: their own, small bound,
  /// so that unprivileged callers cannot crowd out root's Apply and Revert), and of those at most
  /// kMaxWaitingPlansPerCaller of one caller's (by uid: one user cannot keep everyone refused).
  static constexpr size_t kMaxWaitingCalls = 32;
  static constexpr size_t kMaxWaitingPlans = 16;
  static constexpr size_t kMaxWaitingPlansPerCaller = 2;

  void wholeHost() { wholeHost_ = true; }
  void viewStale() { viewStale_ = true; }
  /// A piece of work brought a view of the host read after anything that made it stale.
  void viewFresh() { viewStale_ = false; }

  /// Why a D-Bus call of user `caller` cannot wait (too many such calls wait already); nullopt: it can.
  [[nodiscard]] std::optional<std::string> refused(const WorkerCall& c, uint32_t caller) const {
    const bool plan = c.kind == WorkerCall::Kind::Plan;
    size_t waiting = 0;
    size_t callers = 0;
    for (const auto& w : calls_) {
      if ((w.call.kind == WorkerCall::Kind::Plan) != plan) continue;
      ++waiting;
      callers += w.caller == caller ? 1 : 0;
    }
    if (plan && callers >= kMaxWaitingPlansPerCaller)
      return std::to_string(callers) + " plans of this user are waiting already; try when they are answered";
    if (waiting < (plan ? kMaxWaitingPlans : kMaxWaitingCalls)) return std::nullopt;
    return std::to_string(waiting) + " such calls are waiting already; try later";
  }
  /// Queues a D-Bus call of user `caller` (not refused()).
  void call(WorkerCall c, Reply reply, uint32_t caller) { calls_.push_back({std::move(c), std::move(reply), caller}); }
  /// The replies of every waiting call, which is dropped (the daemon stops).
  std::vector<Reply> dropCalls() {
    std::vector<Reply> out;
    for (auto& w : calls_) out.push_back(std::move(w.reply));
    calls_.clear();
    return out;
  }

  struct Next {
    WorkerRequest work;
    std::optional<Reply> reply;  // the D-Bus caller who waits for it
  };
  /// The next work, or nullopt. While stopping, only a recovery is still done.
  std::optional<Next> next(HotplugFilter& filter, bool wantsView, bool stopping) {
    if (stopping && !recover_) return std::nullopt;
    Next n;
    retrying_ = false;
    if (recover_) {
      recover_ = false;
      n.work.kind = WorkerRequest::Kind::Recover;
    } else if (retry_) {
      n.work = std::move(*retry_);
      retry_.reset();
      retrying_ = true;
    } else if (wholeHost_) {
      wholeHost_ = false;
      filter.dropQueued();
    } else if (filter.hasQueued()) {
      n.work.batch = filter.takeQueued();
    } else if (!calls_.empty()) {
      n.work.kind = WorkerRequest::Kind::Call;
      n.work.call = calls_.front().call;
      n.reply.emplace(std::move(calls_.front().reply));
      calls_.pop_front();
    } else if (wantsView && viewStale_) {
      n.work.kind = WorkerRequest::Kind::View;
      viewStale_ = false;
    } else {
      return std::nullopt;
    }
    return n;
  }

  /// What became of the work a worker died in.
  enum class AfterDeath {
    Again,            // a new worker recovers, then does it once more
    Dropped,          // a new worker recovers; the work is not done again (a D-Bus call, a second death)
    LeftToNextStart,  // it was the recovery: not tried over and over, the next start does it
  };
  /// The worker died with `work` in flight (nullopt: while idle, which queues a recovery too).
  std::optional<AfterDeath> died(std::optional<WorkerRequest> work) {
    if (!work) {
      recover_ = true;
      return std::nullopt;
    }
    if (work->kind == WorkerRequest::Kind::Recover) return AfterDeath::LeftToNextStart;
    recover_ = true;
    if (retrying_ || work->kind == WorkerRequest::Kind::Call) return AfterDeath::Dropped;
    retry_ = std::move(work);
    return AfterDeath::Again;
  }
  /// A recovery waits: the daemon must not stop before it is done.
  [[nodiscard]] bool recovering() const { return recover_; }

 private:
  bool wholeHost_ = false;
  bool viewStale_ = false;
  struct Waiting {
    WorkerCall call;
    Reply reply;
    uint32_t caller = 0;  // the caller's uid
  };
  std::deque<Waiting> calls_;
  std::optional<WorkerRequest> retry_;  // the work a worker died in, to do once more
  bool retrying_ = false;               // the work under way is that retry
  bool recover_ = false;                // a worker died: the next one recovers first
};

}  // namespace iommud::app
