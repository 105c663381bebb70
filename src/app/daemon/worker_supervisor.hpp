#pragma once

#include <functional>
#include <optional>
#include <string>

#include "adapters/dbus/manager_service.hpp"
#include "adapters/systemd/event_loop.hpp"
#include "adapters/systemd/log.hpp"
#include "adapters/systemd/standing_worker.hpp"
#include "app/daemon/work_queue.hpp"
#include "app/worker/worker_report.hpp"

namespace iommud::app {

/// The worker supervisor: the daemon's one piece of work under way in the worker that stays
/// (adapters/systemd StandingWorker, forked at the first work), and the D-Bus call it answers. It
/// sends the work, answers the call from the report, and says once per piece of work that it
/// ended, whatever became of it: a report, a report it could not decode, a worker that died. A
/// worker that died is replaced by one that recovers first; the WorkQueue decides whether the work
/// it died in is done again.
class WorkerSupervisor {
 public:
  using Queue = WorkQueue<adapters::dbus::PendingCall>;
  struct Hooks {
    std::function<void()> atStart;                                         // in the worker, once
    std::function<std::optional<WorkerReport>(const WorkerRequest&)> run;  // in the worker
    std::function<void(const WorkerRequest&, const WorkerReport&)> ended;  // report.complete: done in full
    std::function<void()> free;  // the worker died and nothing ended: the next work may start
  };
  WorkerSupervisor(adapters::systemd::EventLoop& loop, const adapters::systemd::Log& log, Queue& queue, Hooks hooks);

  [[nodiscard]] bool busy() const { return worker_.busy(); }
  /// The worker process now standing (0: none).
  [[nodiscard]] pid_t workerPid() const { return worker_.pid(); }
  /// The work under way (an empty batch when none).
  [[nodiscard]] const WorkerRequest& current() const { return work_; }

  /// Sends the work; false when it could not (logged, and a D-Bus caller told why): it is dropped.
  bool start(WorkerRequest work, std::optional<adapters::dbus::PendingCall> reply);
  /// The worker copied the settings at its fork: after a reload the next work goes to a new one.
  void retireBeforeNext() { retire_ = true; }

 private:
  std::string serve(std::string_view bytes);
  void replied(const std::string& bytes);
  void died(const adapters::systemd::StandingWorker::Death& d);
  void end(const WorkerReport& report);

  const adapters::systemd::Log& log_;
  Queue& queue_;
  Hooks hooks_;
  adapters::systemd::StandingWorker worker_;
  WorkerRequest work_;
  std::optional<adapters::dbus::PendingCall> reply_;
  bool retire_ = false;
};

}  // namespace iommud::app
