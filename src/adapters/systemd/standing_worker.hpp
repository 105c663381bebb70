#pragma once

#include <sys/types.h>

#include <csignal>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "adapters/systemd/owners.hpp"
#include "core/result.hpp"

struct sd_event;
struct sd_event_source;

namespace iommud::adapters::systemd {

/// A worker process that stays (fork, no exec), fed one request at a time over a socketpair on an
/// sd-event loop: a piece of work costs a message each way, not a fork and an exit. The child runs
/// `serve` on each request and sends back what it returns; the loop never waits on it. The child is
/// forked at the first request (and again at the first after it died or was retired); its death
/// is reported once, saying whether a request was in flight, with the reply it wrote before it
/// died if any (never sent on to a child known dead). It blocks SIGCHLD for the process
/// (sd-event watches children through a signalfd).
///
/// Each message is a native-endian 64-bit length and that many bytes: both ends are one program.
class StandingWorker {
 public:
  /// Runs in the child, once per request: the reply's bytes.
  using Serve = std::function<std::string(std::string_view request)>;
  struct Death {
    bool exited = false;    // false: killed by a signal
    int status = 0;         // the exit code, or the signal
    bool inFlight = false;  // a request had no reply: its work may be half done
    // The reply it wrote before it died, handed on here rather than to `replied`: the child is
    // torn down by now, so what the handler sends goes to a new one, not to the dead one.
    std::optional<std::string> reply;
  };
  struct Handlers {
    std::function<void()> atStart;             // in the child, once, before the first request
    Serve serve;                               // in the child
    std::function<void(std::string)> replied;  // in the parent: the reply to the request
    std::function<void(const Death&)> died;    // in the parent: the child died on its own
    std::function<void(pid_t)> started;        // in the parent: a child was forked
  };

  StandingWorker(sd_event* event, Handlers handlers);
  StandingWorker(const StandingWorker&) = delete;
  StandingWorker& operator=(const StandingWorker&) = delete;
  /// Closes the socket and reaps the child, which exits when it has nothing more to do.
  ~StandingWorker() { retire(); }

  [[nodiscard]] bool alive() const { return pid_ > 0; }
  /// A request is out and its reply has not come.
  [[nodiscard]] bool busy() const { return busy_; }
  [[nodiscard]] pid_t pid() const { return pid_; }

  /// Sends a request, forking the child first when there is none. One at a time: not while busy().
  /// An error (no socket, no fork) leaves nothing in flight. A child that cannot take the request
  /// is killed, and its death reported with the request in flight.
  core::Result<core::Done> send(std::string_view request);

  /// Ends the child (it exits at the end of the socket, after any request in flight) and waits
  /// for it; the next send() forks a new one. For settings the child copied at its fork.
  void retire();

 private:
  core::Result<core::Done> fork();
  static int onSocket(sd_event_source* s, int fd, uint32_t revents, void* self);
  static int onChild(sd_event_source* s, const siginfo_t* si, void* self);
  bool readSocket();  // true at the end of the socket (the child closed its end)
  std::optional<std::string> takeReply();
  void drain();
  void ended(const siginfo_t& si);
  void reset();

  sd_event* event_;
  Handlers handlers_;
  pid_t pid_ = 0;
  bool busy_ = false;
  UniqueFd socket_;
  EventSource socketSource_;
  EventSource childSource_;
  std::string input_;
};

/// The child's side of a StandingWorker's socket, exposed for tests: reads one message (false at
/// the end of the socket or on an error), writes one.
bool readMessage(int fd, std::string& out);
bool writeMessage(int fd, std::string_view bytes);

}  // namespace iommud::adapters::systemd
