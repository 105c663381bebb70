#include "adapters/systemd/notify.hpp"

#include <systemd/sd-daemon.h>

namespace iommud::adapters::systemd {

void notify(const std::string& state) {
  (void)sd_notify(0, state.c_str());
}

}  // namespace iommud::adapters::systemd
