#include "adapters/systemd/worker_process.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace iommud::adapters::systemd {

void EventSourceUnref::operator()(sd_event_source* s) const {
  sd_event_source_unref(s);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}

int Fd::release() {
  return std::exchange(fd_, -1);
}

core::Result<core::Done> WorkerProcess::start(const std::function<Result()>& work) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return core::Error{errno, "", std::string("cannot create a pipe: ") + std::strerror(errno)};
  Fd readEnd(fds[0]);
  Fd writeEnd(fds[1]);
  pid_t pid = fork();
  if (pid < 0) return core::Error{errno, "", std::string("cannot fork: ") + std::strerror(errno)};
  if (pid == 0) {
    readEnd = Fd();
    Result r = work();
    for (size_t off = 0; off < r.output.size();) {
      ssize_t n = write(writeEnd.get(), r.output.data() + off, r.output.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(r.code);
  }
  writeEnd = Fd();
  (void)fcntl(readEnd.get(), F_SETFL, O_NONBLOCK);
  pipe_ = std::move(readEnd);
  pid_ = pid;
  output_.clear();
  sd_event_source* io = nullptr;
  sd_event_source* child = nullptr;
  int r = sd_event_add_io(event_, &io, pipe_.get(), EPOLLIN, onPipe, this);
  pipeSource_.reset(io);
  if (r >= 0) r = sd_event_add_child(event_, &child, pid, WEXITED, onChild, this);
  childSource_.reset(child);
  if (r < 0) {  // cannot happen short of running out of memory: wait here rather than lose the child
    siginfo_t si{};
    waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED);
    ended(si);
  }
  return core::Done{};
}

int WorkerProcess::onPipe(sd_event_source* /*s*/, int /*fd*/, uint32_t /*revents*/, void* self) {
  static_cast<WorkerProcess*>(self)->drain();
  return 0;
}

int WorkerProcess::onChild(sd_event_source* /*s*/, const siginfo_t* si, void* self) {
  static_cast<WorkerProcess*>(self)->ended(*si);
  return 0;
}

void WorkerProcess::drain() {
  char buf[4096];
  for (;;) {
    ssize_t n = read(pipe_.get(), buf, sizeof buf);
    if (n <= 0) break;
    output_.append(buf, static_cast<size_t>(n));
  }
}

void WorkerProcess::ended(const siginfo_t& si) {
  drain();
  pipeSource_.reset();
  childSource_.reset();
  pipe_ = Fd();
  pid_ = 0;
  // The callback may start the next child: hand it the output first.
  onExit_(Exit{si.si_code == CLD_EXITED, si.si_status, std::exchange(output_, {})});
}

}  // namespace iommud::adapters::systemd
