#include "app/fleet/fleet_files.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

#include "adapters/state/atomic_file.hpp"

namespace iommud::app {

namespace {

// Far above any host's export (a few hundred bytes a device); a larger file is not ours as written.
constexpr size_t kMaxExportBytes = size_t{16} << 20U;

// What the export says now, read without following a link or opening a FIFO; nullopt when it is
// absent or not a file we could have written, so that it is written (replacing what is there).
std::optional<std::string> readOld(const std::string& path) {
  auto old = adapters::state::readOwnFile(path, kMaxExportBytes);
  if (!old) return std::nullopt;
  return *old;
}

std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

ExportResult write(const std::string& path, const std::string& text) {
  ExportResult r{path, false, {}};
  // A missing directory is said by the write itself, naming the file.
  if (auto dir = adapters::state::checkOwnDirectory(directoryOf(path)); !dir && dir.error().code != ENOENT) {
    r.error = dir.error().describe();
    return r;
  }
  auto done = adapters::state::writeFileAtomic(path, text, 0644);
  if (done) {
    r.written = true;
  } else {
    // Named after the final path: the temporary file has a random name.
    r.error = path + ": " + std::strerror(done.error().code);
  }
  return r;
}

}  // namespace

std::vector<ExportResult> writeExports(const ExportTargets& targets, const Status& status, const Counters& counters,
                                       int64_t now) {
  std::vector<ExportResult> out;
  if (targets.prometheusFile) {
    const auto& path = *targets.prometheusFile;
    auto old = readOld(path);
    if (old && sameMetrics(*old, prometheusText(status, counters, std::nullopt))) {
      out.push_back({path, false, {}});
    } else {
      out.push_back(write(path, prometheusText(status, counters, now)));
    }
  }
  if (targets.nfdFile) {
    const auto& path = *targets.nfdFile;
    auto text = nfdFeatures(status);
    if (readOld(path) == text) {
      out.push_back({path, false, {}});
    } else {
      out.push_back(write(path, text));
    }
  }
  return out;
}

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

}  // namespace iommud::app
