#pragma once

#include <optional>
#include <string>

namespace iommud::app {

/// Where iommud keeps what it changed: the run directory (lock, transaction journal, runtime
/// records; gone at reboot like the values they describe) and the state directory (records of
/// files that outlive a reboot, and a copy of the runtime records, so that revert can say which
/// changes a reboot undid). Host paths: under --root they are inside the root.
struct StatePaths {
  std::string runDir = "/run/iommud";
  std::string stateDir = "/var/lib/iommud";
  std::string modprobeDir = "/etc/modprobe.d";
};

/// The value of an environment variable naming directories, the first of several (systemd passes
/// them colon-separated); nullopt when it is unset or empty.
std::optional<std::string> directoryFromEnvironment(const char* name);

/// The state directories as the environment moves them: `<prefix>RUNTIME_DIRECTORY` and
/// `<prefix>STATE_DIRECTORY` (systemd's for the daemon, prefix ""; IOMMUD_... for iommuctl);
/// the defaults where they are unset.
StatePaths statePathsFromEnvironment(const std::string& prefix);

}  // namespace iommud::app
