#pragma once

#include <memory>

#include "support/unique_fd.hpp"

struct sd_event_source;

// RAII owners of what the daemon's loop holds: an sd-event source (a file descriptor's is
// support::UniqueFd).

namespace iommud::adapters::systemd {

using support::UniqueFd;

/// An sd-event source, unreferenced (and so gone from its loop) with its owner.
struct EventSourceUnref {
  void operator()(sd_event_source* s) const;
};
using EventSource = std::unique_ptr<sd_event_source, EventSourceUnref>;

}  // namespace iommud::adapters::systemd
