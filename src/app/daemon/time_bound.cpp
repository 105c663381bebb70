#include "app/daemon/time_bound.hpp"

#include <cstring>
#include <string>

#include "adapters/process/child.hpp"

namespace iommud::app {

int runWithin(std::chrono::milliseconds limit, const std::function<int()>& work, const adapters::systemd::Log& log) {
  auto child = adapters::process::forkRunning(work);
  if (!child) {
    log.warning(std::string("cannot start a worker: ") + std::strerror(child.error().code) +
                "; working without a time limit");
    return work();
  }
  if (auto code = adapters::process::waitUntil(*child, std::chrono::steady_clock::now() + limit)) return *code;
  log.warning("still working after " + std::to_string(limit.count() / 1000) + " s; not waiting any longer (process " +
              std::to_string(*child) + " goes on; a device it has not reached keeps its translated type)");
  return kExitStillRunning;
}

}  // namespace iommud::app
