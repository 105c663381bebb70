#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "app/change/outcome.hpp"
#include "app/host/status.hpp"
#include "core/dma_stats.hpp"

namespace iommud::app {

/// What the daemon did since it started, counted for Prometheus (docs/metrics.md).
struct Counters {
  uint64_t done = 0, advised = 0, refused = 0, failed = 0;  // policy changes, by what became of them
  uint64_t reverted = 0, revertFailed = 0, drift = 0;       // records restored, not restored, drifted
  /// DMA mapping work per device since measuring began (docs/measure.md "Fleet counters"); none
  /// when the daemon does not measure. Not summed by +=: only the daemon measures.
  std::optional<core::DmaReading> dma;
  /// Counts one more under `key`, as counterKey() names it; an unknown key counts nothing.
  void add(std::string_view key);
  Counters& operator+=(const Counters& other);
  bool operator==(const Counters&) const = default;
};

/// The counter an outcome counts in, or nullopt (kept, and skipped changes that are no
/// refusal). `revert`: the outcome of restoring a record rather than of applying a policy.
std::optional<std::string_view> counterKey(const Outcome& o, bool revert);

/// The node_exporter textfile-collector file (docs/metrics.md): every family with HELP and TYPE,
/// in a fixed order; families without samples are left out. `updatedAt` (seconds since the
/// epoch) is iommud_last_update_timestamp_seconds, the last family; nullopt leaves it out.
std::string prometheusText(const Status& status, const Counters& counters, std::optional<int64_t> updatedAt);

/// Whether two textfiles say the same but for iommud_last_update_timestamp_seconds: the file
/// is rewritten only when the view changed, and its timestamp is when it last did.
bool sameMetrics(std::string_view a, std::string_view b);

/// The feature file for node-feature-discovery's `local` source (docs/metrics.md): a comment,
/// then `feature.node.kubernetes.io/iommud-<name>=<value>` lines in a fixed order.
std::string nfdFeatures(const Status& status);

/// The name of the textfile in the configured directory (node_exporter reads only `*.prom`).
inline constexpr std::string_view kPrometheusFile = "iommud.prom";

}  // namespace iommud::app
