#include "adapters/systemd/owners.hpp"

#include <systemd/sd-event.h>
#include <unistd.h>

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

}  // namespace iommud::adapters::systemd
