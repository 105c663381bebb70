#include "app/daemon_exports.hpp"

#include <utility>

namespace iommud::app {

ExportTargets exportTargets(const config::DaemonConfig& config) {
  ExportTargets t;
  if (config.prometheus) t.prometheusFile = config.prometheusDirectory + "/" + std::string(kPrometheusFile);
  if (config.nfd) t.nfdFile = config.nfdFile;
  return t;
}

std::vector<std::string> droppedExports(const ExportTargets& before, const ExportTargets& now) {
  std::vector<std::string> out;
  for (const auto& [was, is] :
       {std::pair(before.prometheusFile, now.prometheusFile), std::pair(before.nfdFile, now.nfdFile)}) {
    if (was && was != is) out.push_back(*was);
  }
  return out;
}

std::optional<ExportErrors::Note> ExportErrors::note(const std::string& path, const std::string& error) {
  auto& last = last_[path];
  if (error == last) return std::nullopt;
  last = error;
  if (error.empty()) return Note{false, "fleet export: " + path + " is written again"};
  return Note{true, "fleet export: cannot write " + error + " (said again only when the reason changes), ignoring"};
}

}  // namespace iommud::app
