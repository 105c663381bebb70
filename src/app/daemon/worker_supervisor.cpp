#include "app/daemon/worker_supervisor.hpp"

#include <utility>

namespace iommud::app {

namespace sd = adapters::systemd;
namespace bus = adapters::dbus;

WorkerSupervisor::WorkerSupervisor(sd::EventLoop& loop, const sd::Log& log, Queue& queue, Hooks hooks)
    : log_(log),
      queue_(queue),
      hooks_(std::move(hooks)),
      worker_(loop.get(),
              {.atStart = hooks_.atStart,
               .serve = [this](std::string_view bytes) { return serve(bytes); },
               .replied = [this](const std::string& bytes) { replied(bytes); },
               .died = [this](const sd::StandingWorker::Death& d) { died(d); },
               .started = [this](pid_t pid) { log_.debug("worker process " + std::to_string(pid) + " started"); }}) {}

bool WorkerSupervisor::start(WorkerRequest work, std::optional<bus::PendingCall> reply) {
  work_ = std::move(work);
  reply_ = std::move(reply);
  if (retire_) {  // idle: it ends at once
    retire_ = false;
    worker_.retire();
  }
  auto sent = worker_.send(encodeRequest(work_));
  if (sent) return true;
  log_.error(sent.error().describe() + ", ignoring this work");
  if (reply_) reply_->replyError(bus::kErrorFailed, sent.error().describe());
  reply_.reset();
  work_ = {};
  return false;
}

// In the worker: one request, its report.
std::string WorkerSupervisor::serve(std::string_view bytes) {
  auto work = decodeRequest(bytes);
  if (!work) {
    log_.error("worker: " + work.error().describe());
    return encodeReport(WorkerReport{.complete = false});
  }
  auto report = hooks_.run(*work);
  return encodeReport(report ? *report : WorkerReport{.complete = false});
}

void WorkerSupervisor::replied(const std::string& bytes) {
  auto decoded = decodeReport(bytes);
  if (!decoded) log_.error("the worker for " + describe(work_) + ": " + decoded.error().describe());
  end(decoded ? std::move(decoded).value() : WorkerReport{.complete = false});
}

// The worker died on its own. Whatever it was doing may be half done: a new worker recovers the
// transaction first (as a start does), then does the work again, once; a D-Bus call is answered
// with an error instead, as the caller may not want it twice.
void WorkerSupervisor::died(const sd::StandingWorker::Death& d) {
  using After = Queue::AfterDeath;
  const std::string how =
      d.exited ? "exited with " + std::to_string(d.status) : "was killed by signal " + std::to_string(d.status);
  if (!d.inFlight) {
    (void)queue_.died(std::nullopt);
    log_.error("the worker process " + how + (d.reply ? " after its reply" : " while idle") +
               "; a new one starts with the next work");
    if (d.reply) {
      replied(*d.reply);  // the work ended; the recovery goes first
    } else {
      hooks_.free();
    }
    return;
  }
  const auto after = queue_.died(work_).value_or(After::Dropped);
  log_.error("the worker process for " + describe(work_) + " " + how + "; " +
             (after == After::LeftToNextStart ? std::string("the next start recovers the half-done transaction")
                                              : "a new one recovers any half-done transaction" +
                                                    std::string(after == After::Again ? " and does it again" : "")));
  if (after != After::Again) {
    end(WorkerReport{.complete = false});
    return;
  }
  work_ = {};
  hooks_.free();
}

// The D-Bus caller hears the report's answer, then the daemon takes the report in.
void WorkerSupervisor::end(const WorkerReport& report) {
  if (reply_ && work_.kind == WorkerRequest::Kind::Call) {
    bus::PendingCall reply = std::move(*reply_);
    if (report.error) {
      reply.replyError(report.error->name.c_str(), report.error->message);
    } else if (!report.complete) {
      reply.replyError(bus::kErrorFailed, "the work was cut short; the journal says why");
    } else if (work_.call.kind == WorkerCall::Kind::Plan) {
      reply.replyText(report.planJson.value_or(""));
    } else {
      reply.replyActions(report.actions);
    }
  }
  reply_.reset();
  const WorkerRequest work = std::exchange(work_, {});
  hooks_.ended(work, report);
}

}  // namespace iommud::app
