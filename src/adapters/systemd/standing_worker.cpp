#include "adapters/systemd/standing_worker.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <utility>

namespace iommud::adapters::systemd {

namespace {

// A bound on a send the child does not take: it is idle, reading, whenever a request is sent.
constexpr int kSendLimitMs = 10'000;

bool readAll(int fd, char* data, size_t size) {
  for (size_t off = 0; off < size;) {
    ssize_t n = read(fd, data + off, size - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Writes all of `bytes`, waiting (at most kSendLimitMs each time) when the socket is full.
bool sendAll(int fd, const char* data, size_t size) {
  for (size_t off = 0; off < size;) {
    ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, kSendLimitMs) <= 0) return false;
      continue;
    }
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string framed(std::string_view bytes) {
  const uint64_t size = bytes.size();
  std::string out(reinterpret_cast<const char*>(&size), sizeof size);
  out.append(bytes);
  return out;
}

[[noreturn]] void serveForever(int fd, const StandingWorker::Handlers& h) {
  if (h.atStart) h.atStart();
  std::string request;
  while (readMessage(fd, request)) {
    if (!writeMessage(fd, h.serve(request))) break;
    // Idle until the next request: the heap it used goes back to the kernel. free() alone keeps
    // the pages of every block below the heap's top, and the child stays between requests, so
    // it would hold its largest request's heap for good (4.5 MB after a host of 4096 devices).
    request = std::string();
    (void)malloc_trim(0);  // 1: something was released, 0: nothing was; either is fine
  }
  _exit(0);
}

}  // namespace

bool readMessage(int fd, std::string& out) {
  uint64_t size = 0;
  if (!readAll(fd, reinterpret_cast<char*>(&size), sizeof size)) return false;
  out.assign(size, '\0');
  return readAll(fd, out.data(), out.size());
}

bool writeMessage(int fd, std::string_view bytes) {
  auto frame = framed(bytes);
  return sendAll(fd, frame.data(), frame.size());
}

StandingWorker::StandingWorker(sd_event* event, Handlers handlers) : event_(event), handlers_(std::move(handlers)) {
  sigset_t mask;  // sd_event_add_child needs SIGCHLD blocked from before the first fork
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  (void)sigprocmask(SIG_BLOCK, &mask, nullptr);
}

core::Result<core::Done> StandingWorker::fork() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return core::Error{errno, "", std::string("cannot create a socket pair: ") + std::strerror(errno)};
  UniqueFd ours(fds[0]);
  UniqueFd theirs(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return core::Error{errno, "", std::string("cannot fork: ") + std::strerror(errno)};
  if (pid == 0) {
    ours = UniqueFd();
    serveForever(theirs.get(), handlers_);
  }
  theirs = UniqueFd();
  (void)fcntl(ours.get(), F_SETFL, O_NONBLOCK);
  socket_ = std::move(ours);
  pid_ = pid;
  input_.clear();
  sd_event_source* io = nullptr;
  sd_event_source* child = nullptr;
  int r = sd_event_add_io(event_, &io, socket_.get(), EPOLLIN, onSocket, this);
  socketSource_.reset(io);
  if (r >= 0) r = sd_event_add_child(event_, &child, pid, WEXITED, onChild, this);
  childSource_.reset(child);
  if (r < 0) {  // out of memory: a child the loop cannot watch must not stay
    kill(pid, SIGKILL);
    retire();
    return core::Error{-r, "", std::string("cannot watch the worker: ") + std::strerror(-r)};
  }
  if (handlers_.started) handlers_.started(pid);
  return core::Done{};
}

core::Result<core::Done> StandingWorker::send(std::string_view request) {
  if (busy_) return core::Error{EBUSY, "", "the worker is busy"};
  if (pid_ <= 0) {
    if (auto forked = fork(); !forked) return forked.error();
  }
  busy_ = true;
  auto frame = framed(request);
  if (!sendAll(socket_.get(), frame.data(), frame.size())) {
    // It cannot take it: it is dying, or stuck. Either way its death says what became of the request.
    kill(pid_, SIGKILL);
  }
  return core::Done{};
}

void StandingWorker::retire() {
  if (pid_ <= 0) return;
  childSource_.reset();
  socketSource_.reset();
  socket_ = UniqueFd();  // the child reads the end of the socket and exits
  siginfo_t si{};
  while (waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED) != 0 && errno == EINTR) {
  }
  reset();
}

int StandingWorker::onSocket(sd_event_source* s, int /*fd*/, uint32_t revents, void* self) {
  auto* w = static_cast<StandingWorker*>(self);
  // The peer's end closed: the child is gone or going, and its death is reported by onChild.
  if ((revents & (EPOLLHUP | EPOLLERR)) != 0 && (revents & EPOLLIN) == 0) {
    (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
    return 0;
  }
  w->drain();
  return 0;
}

int StandingWorker::onChild(sd_event_source* /*s*/, const siginfo_t* si, void* self) {
  static_cast<StandingWorker*>(self)->ended(*si);
  return 0;
}

bool StandingWorker::readSocket() {
  char buf[65536];
  for (;;) {
    ssize_t n = read(socket_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0) return false;
    input_.append(buf, static_cast<size_t>(n));
  }
}

std::optional<std::string> StandingWorker::takeReply() {
  uint64_t size = 0;
  if (!busy_ || input_.size() < sizeof size) return std::nullopt;
  std::memcpy(&size, input_.data(), sizeof size);
  if (input_.size() - sizeof size < size) return std::nullopt;
  std::string reply = input_.substr(sizeof size, size);
  input_.erase(0, sizeof size + size);
  busy_ = false;
  return reply;
}

void StandingWorker::drain() {
  if (readSocket()) {
    // The end of the socket: the child is gone. Its reply, if whole, comes with its death, once it
    // is torn down: handed on now, the next request would be sent to the dead child.
    if (socketSource_) (void)sd_event_source_set_enabled(socketSource_.get(), SD_EVENT_OFF);
    return;
  }
  // The handler may send the next request.
  if (auto reply = takeReply()) handlers_.replied(std::move(*reply));
}

void StandingWorker::ended(const siginfo_t& si) {
  if (socket_.get() >= 0) (void)readSocket();
  auto reply = takeReply();  // a reply written before it died is a reply
  const Death death{si.si_code == CLD_EXITED, si.si_status, busy_, std::move(reply)};
  childSource_.reset();
  socketSource_.reset();
  socket_ = UniqueFd();
  reset();
  handlers_.died(death);
}

void StandingWorker::reset() {
  pid_ = 0;
  busy_ = false;
  input_.clear();
}

}  // namespace iommud::adapters::systemd
