#pragma once

#include <string>

#include "adapters/systemd/log.hpp"
#include "app/change/state_paths.hpp"

namespace iommud::app {

/// Where the daemon finds its configuration and keeps its state: $CONFIGURATION_DIRECTORY,
/// $RUNTIME_DIRECTORY and $STATE_DIRECTORY as systemd sets them, else the compiled defaults.
struct DaemonPaths {
  std::string configFile = "/etc/iommud/iommud.conf";
  StatePaths state;
  std::string root = "/";  // the host's root: "/", or a synthetic one (benchmarks, tests)
};
DaemonPaths daemonPathsFromEnvironment();

/// Exit codes of `iommud`: EX_CONFIG (78) for a configuration or policy set that is not valid
/// (the unit does not restart on it), 1 for anything else that stops it.
inline constexpr int kExitConfig = 78;

/// How `iommud` runs: as the daemon, or one pass and exit.
struct DaemonOptions {
  bool once = false;   // --once: the coldplug apply only, in this process, then exit
  bool early = false;  // --early (with once): the boot pass, only rules with when = "boot"
};

/// The daemon: takes the writer lock, recovers, applies the policies to every device (coldplug),
/// says READY=1, then applies them to each device that appears, until SIGTERM. `once`: the
/// coldplug apply only (with `early`: the boot rules only), in this process, then exit.
int runDaemon(const DaemonPaths& paths, const DaemonOptions& options, const adapters::systemd::Log& log);

}  // namespace iommud::app
