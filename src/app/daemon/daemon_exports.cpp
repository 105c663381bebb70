#include "app/daemon/daemon_exports.hpp"

#include <cerrno>
#include <utility>

#include "adapters/state/atomic_file.hpp"

namespace iommud::app {

std::optional<ExportErrors::Note> ExportErrors::note(const std::string& path, const std::string& error) {
  auto& last = last_[path];
  if (error == last) return std::nullopt;
  last = error;
  if (error.empty()) return Note{false, "fleet export: " + path + " is written again"};
  return Note{true, "fleet export: cannot write " + error + " (said again only when the reason changes), ignoring"};
}

void DaemonExports::written(const std::string& path, const std::string& error) {
  auto note = errors_.note(path, error);
  if (!note) return;
  if (note->warning) {
    log_.warning(note->message);
  } else {
    log_.notice(note->message);
  }
}

void DaemonExports::reloaded(const ExportTargets& before) {
  for (const auto& was : droppedExports(before, targets())) {
    if (auto removed = adapters::state::removeFile(was); !removed && removed.error().code != ENOENT) {
      log_.warning("fleet export: cannot remove " + was + ": " + removed.error().message + ", ignoring");
    }
    errors_.forget(was);
  }
}

}  // namespace iommud::app
