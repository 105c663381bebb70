#include "app/daemon/daemon_exports.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

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
    if (unlink(was.c_str()) != 0 && errno != ENOENT) {
      log_.warning("fleet export: cannot remove " + was + ": " + std::strerror(errno) + ", ignoring");
    }
    errors_.forget(was);
  }
}

}  // namespace iommud::app
