// The worker that stays, on a real sd-event loop with a real child, without the daemon.
#include "adapters/systemd/standing_worker.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "support/worker_exit.hpp"

namespace standing_worker_test {

namespace sd = iommud::adapters::systemd;

// A loop with SIGCHLD blocked (sd_event_add_child needs it), as the daemon runs it, bounded so
// that a test that waits for something that never comes fails instead of hanging.
struct Loop {
  sd_event* event = nullptr;
  sd_event_source* bound = nullptr;
  sigset_t old{};
  Loop() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, &old);
    sd_event_new(&event);
    sd_event_add_time_relative(
        event, &bound, CLOCK_MONOTONIC, 60'000'000, 0,
        [](sd_event_source*, uint64_t, void* e) { return sd_event_exit(static_cast<sd_event*>(e), 1); }, event);
  }
  ~Loop() {
    sd_event_source_unref(bound);
    sd_event_unref(event);
    sigprocmask(SIG_SETMASK, &old, nullptr);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  int run() { return sd_event_loop(event); }
};

// The child's anonymous resident memory, KiB.
long rssAnonKiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == "RssAnon:") {
      status >> value;
      break;
    }
  }
  return value;
}

// 32 MiB in 4 KiB blocks (on the heap, below malloc's mmap threshold), one in 64 kept for good,
// as a worker's long-lived allocations are scattered among its work's; the rest freed. The peak
// RssAnon.
long scatter() {
  static std::vector<char*> kept;
  std::vector<char*> blocks;
  for (int i = 0; i < 8192; ++i) {
    char* b = new char[4096];
    std::fill_n(b, 4096, 'x');
    (i % 64 == 63 ? kept : blocks).push_back(b);
  }
  const long peak = rssAnonKiB();
  for (char* b : blocks) delete[] b;
  return peak;
}

// Replies "<pid>:<request>"; "die" kills the child mid-request, "big" replies 3 MiB, "exit" replies
// and exits at once.
std::string serve(std::string_view request) {
  if (request == "die") raise(SIGKILL);
  if (request == "exit") iommud::testing::replyAndExit(std::to_string(getpid()) + ":exit");
  if (request == "big") return std::string(3 << 20, 'x') + "end";
  if (request == "scatter") return std::to_string(scatter());
  if (request == "anon") return std::to_string(rssAnonKiB());
  return std::to_string(getpid()) + ":" + std::string(request);
}

struct Harness {
  Loop loop;
  std::vector<std::string> replies;
  std::vector<sd::StandingWorker::Death> deaths;
  std::vector<pid_t> started;
  std::vector<std::string> script;  // what to send after each reply or death, in order
  std::optional<sd::StandingWorker> worker;

  Harness() {
    sd::StandingWorker::Handlers h;
    h.serve = serve;
    h.replied = [this](std::string r) {
      replies.push_back(std::move(r));
      next();
    };
    h.died = [this](const sd::StandingWorker::Death& d) {
      deaths.push_back(d);
      if (d.reply) replies.push_back(*d.reply);
      next();
    };
    h.started = [this](pid_t pid) { started.push_back(pid); };
    worker.emplace(loop.event, std::move(h));
  }
  void next() {
    if (script.empty()) {
      sd_event_exit(loop.event, 0);
      return;
    }
    auto request = script.front();
    script.erase(script.begin());
    if (request == "kill") {  // the death comes next
      kill(worker->pid(), SIGKILL);
      return;
    }
    if (request == "retire") {
      worker->retire();
      next();
      return;
    }
    EXPECT_TRUE(worker->send(request));
  }
  int run(std::vector<std::string> s) {
    script = std::move(s);
    next();
    return loop.run();
  }
};

TEST(StandingWorker, OneChildServesEveryRequestInOrder) {
  Harness h;
  ASSERT_EQ(h.run({"a", "b", "c"}), 0);
  ASSERT_EQ(h.started.size(), 1U);
  const auto pid = std::to_string(h.started[0]);
  EXPECT_EQ(h.replies, (std::vector<std::string>{pid + ":a", pid + ":b", pid + ":c"}));
  EXPECT_TRUE(h.deaths.empty());
  EXPECT_TRUE(h.worker->alive());
  EXPECT_FALSE(h.worker->busy());
}

TEST(StandingWorker, AReplyLargerThanTheSocketHoldsComesWhole) {
  Harness h;
  ASSERT_EQ(h.run({"big", "after"}), 0);
  ASSERT_EQ(h.replies.size(), 2U);
  EXPECT_EQ(h.replies[0].size(), (3U << 20) + 3);
  EXPECT_TRUE(h.replies[0].ends_with("end"));
  EXPECT_EQ(h.replies[1], std::to_string(h.started[0]) + ":after");
}

// Idle between requests, the child gives the heap a request used back to the kernel. What it
// checks is glibc's malloc, which AddressSanitizer replaces with an allocator of its own that keeps
// freed memory in quarantine and does not trim: so it is built where glibc allocates (the `tests`
// and `tests-arm64` stages of scripts/check), not in the ASan build.
#if !defined(__SANITIZE_ADDRESS__)
TEST(StandingWorker, AnIdleChildHoldsNotTheHeapOfItsLastRequest) {
  Harness h;
  ASSERT_EQ(h.run({"scatter", "anon"}), 0);
  ASSERT_EQ(h.replies.size(), 2U);
  const long peak = std::stol(h.replies[0]);
  const long idle = std::stol(h.replies[1]);
  ASSERT_GT(peak, 32 * 1024);
  EXPECT_LT(idle, peak - 24 * 1024) << "peak " << peak << " KiB, idle " << idle << " KiB";
}
#endif

TEST(StandingWorker, AChildKilledMidRequestIsReportedInFlightAndTheNextSendForksAnother) {
  Harness h;
  ASSERT_EQ(h.run({"a", "die", "b"}), 0);
  ASSERT_EQ(h.deaths.size(), 1U);
  EXPECT_FALSE(h.deaths[0].exited);
  EXPECT_EQ(h.deaths[0].status, SIGKILL);
  EXPECT_TRUE(h.deaths[0].inFlight);
  ASSERT_EQ(h.started.size(), 2U);
  EXPECT_NE(h.started[0], h.started[1]);
  EXPECT_EQ(h.replies,
            (std::vector<std::string>{std::to_string(h.started[0]) + ":a", std::to_string(h.started[1]) + ":b"}));
}

// The race of a child that dies right after its reply: the loop sees its reply, the end of its
// socket and its death together, in whichever order sd-event takes them. The reply is handed on
// only once the dead child is torn down, so the next request goes to a new child and is not taken
// for one the dead child died in.
TEST(StandingWorker, AReplyFromAChildThatExitsAtOnceIsHandedOnAndTheNextRequestGoesToANewChild) {
  Harness h;
  h.script = {"b"};
  ASSERT_TRUE(h.worker->send("exit"));
  ASSERT_EQ(h.started.size(), 1U);
  siginfo_t si{};  // dead, and not reaped, before the loop looks at anything
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(h.started[0]), &si, WEXITED | WNOWAIT), 0);
  ASSERT_EQ(h.loop.run(), 0);
  ASSERT_EQ(h.deaths.size(), 1U);
  EXPECT_TRUE(h.deaths[0].exited);
  EXPECT_EQ(h.deaths[0].status, 0);
  EXPECT_FALSE(h.deaths[0].inFlight);
  ASSERT_EQ(h.started.size(), 2U);
  EXPECT_EQ(h.replies,
            (std::vector<std::string>{std::to_string(h.started[0]) + ":exit", std::to_string(h.started[1]) + ":b"}));
}

TEST(StandingWorker, AnIdleChildKilledIsReportedNotInFlight) {
  Harness h;
  ASSERT_EQ(h.run({"a", "kill"}), 0);
  ASSERT_EQ(h.deaths.size(), 1U);
  EXPECT_FALSE(h.deaths[0].inFlight);
  EXPECT_FALSE(h.worker->alive());
}

TEST(StandingWorker, RetireEndsTheChildAndReapsIt) {
  Harness h;
  ASSERT_EQ(h.run({"a", "retire", "b"}), 0);
  ASSERT_EQ(h.started.size(), 2U);
  EXPECT_TRUE(h.deaths.empty());  // an end it was asked for is no death
  errno = 0;
  EXPECT_EQ(kill(h.started[0], 0), -1);  // reaped: no zombie left with its pid
  EXPECT_EQ(errno, ESRCH);
  h.worker->retire();
  EXPECT_FALSE(h.worker->alive());
  EXPECT_EQ(kill(h.started[1], 0), -1);
}

TEST(StandingWorker, MessagesAreFramedByTheirLength) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  sd::UniqueFd a(fds[0]);
  sd::UniqueFd b(fds[1]);
  ASSERT_TRUE(sd::writeMessage(a.get(), ""));
  ASSERT_TRUE(sd::writeMessage(a.get(), std::string("x\0y", 3)));
  std::string got;
  ASSERT_TRUE(sd::readMessage(b.get(), got));
  EXPECT_EQ(got, "");
  ASSERT_TRUE(sd::readMessage(b.get(), got));
  EXPECT_EQ(got, std::string("x\0y", 3));
  a = sd::UniqueFd();
  EXPECT_FALSE(sd::readMessage(b.get(), got));  // the end of the socket
}

}  // namespace standing_worker_test
