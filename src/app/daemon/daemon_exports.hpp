#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "adapters/systemd/log.hpp"
#include "app/fleet/fleet_files.hpp"
#include "config/daemon_config.hpp"

namespace iommud::app {

/// An export that cannot be written is said once per reason, not at every change of the host.
class ExportErrors {
 public:
  struct Note {
    bool warning = false;  // false: a notice
    std::string message;
    bool operator==(const Note&) const = default;
  };
  /// What to log of an export's latest write (error empty: it was written, or is up to date);
  /// nullopt when it says what the last write of that file said.
  std::optional<Note> note(const std::string& path, const std::string& error);
  void forget(const std::string& path) { last_.erase(path); }

 private:
  std::map<std::string, std::string> last_;  // path -> why it was last not written ("": it was)
};

/// The daemon's side of the fleet exports (the worker writes them): where they go under the
/// configuration in force, what each write said (a reason logged once), and the files a reload
/// turned off, which go.
class DaemonExports {
 public:
  /// `config`: the daemon's, which a reload replaces in place.
  DaemonExports(const config::DaemonConfig& config, const adapters::systemd::Log& log) : config_(config), log_(log) {}
  [[nodiscard]] ExportTargets targets() const { return exportTargets(config_); }
  /// One export's latest write: error empty when it was written or is up to date.
  void written(const std::string& path, const std::string& error);
  /// After a reload: what `before` wrote and the new configuration does not is removed.
  void reloaded(const ExportTargets& before);

 private:
  const config::DaemonConfig& config_;
  const adapters::systemd::Log& log_;
  ExportErrors errors_;
};

}  // namespace iommud::app
