#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <string_view>

#include "adapters/systemd/standing_worker.hpp"

namespace iommud::testing {

/// In a StandingWorker's child: writes `reply` as its reply and exits at once, before it reads
/// another request (a worker that dies right after its reply). Its end of the socket is the one
/// socket whose peer is the parent.
[[noreturn]] inline void replyAndExit(std::string_view reply) {
  for (int fd = 3; fd < 1024; ++fd) {
    ucred peer{};
    socklen_t size = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 && peer.pid == getppid()) {
      (void)adapters::systemd::writeMessage(fd, reply);
      break;
    }
  }
  _exit(0);
}

}  // namespace iommud::testing
