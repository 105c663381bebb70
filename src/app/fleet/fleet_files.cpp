#include "app/fleet/fleet_files.hpp"

#include <cstring>
#include <fstream>
#include <iterator>

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

}  // namespace iommud::app
