#include "adapters/systemd/owners.hpp"

#include <systemd/sd-event.h>

namespace iommud::adapters::systemd {

void EventSourceUnref::operator()(sd_event_source* s) const {
  sd_event_source_unref(s);
}

}  // namespace iommud::adapters::systemd
