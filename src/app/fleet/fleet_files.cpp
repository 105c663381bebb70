#include "app/fleet/fleet_files.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "adapters/state/atomic_file.hpp"

namespace iommud::app {

namespace {

std::optional<std::string> readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

ExportResult write(const std::string& path, const std::string& text) {
  ExportResult r{path, false, {}};
  auto done = adapters::state::writeFileAtomic(path, text, 0644);
  if (done) {
    r.written = true;
  } else {
    // Named after the final path: the temporary file's name holds the worker's pid.
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
    auto old = readWhole(path);
    if (old && sameMetrics(*old, prometheusText(status, counters, std::nullopt))) {
      out.push_back({path, false, {}});
    } else {
      out.push_back(write(path, prometheusText(status, counters, now)));
    }
  }
  if (targets.nfdFile) {
    const auto& path = *targets.nfdFile;
    auto text = nfdFeatures(status);
    if (readWhole(path) == text) {
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
