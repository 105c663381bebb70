#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/policy_loader.hpp"
#include "core/names.hpp"

namespace iommud::config {

/// How much the daemon logs, syslog's levels from the most to the least severe.
enum class LogLevel { Error, Warning, Notice, Info, Debug };
inline constexpr core::Names<LogLevel, 5> kLogLevelNames{{{LogLevel::Error, "error"},
                                                          {LogLevel::Warning, "warning"},
                                                          {LogLevel::Notice, "notice"},
                                                          {LogLevel::Info, "info"},
                                                          {LogLevel::Debug, "debug"}}};
static_assert(core::checkNames(kLogLevelNames, LogLevel::Debug));
std::string_view toString(LogLevel level);

/// The daemon's settings: what /etc/iommud/iommud.conf says, defaults elsewhere.
struct DaemonConfig {
  LogLevel logLevel = LogLevel::Info;
  std::chrono::milliseconds debounce{200};  // per-device quiet time before acting on a burst of uevents
  bool adviseOnly = false;                  // plan and log, change nothing (every rule as if mode = "advise")
  bool revertOnStop = false;                // restore what iommud changed when the service stops
  std::vector<std::string> policyDirs;      // empty: the default layers (defaultPolicyDirs())
  // [prometheus]: a node_exporter textfile-collector file, <directory>/iommud.prom (docs/metrics.md).
  bool prometheus = false;
  std::string prometheusDirectory = "/var/lib/prometheus/node-exporter";  // Debian's textfile directory
  // [nfd]: a feature file for node-feature-discovery's `local` source (docs/metrics.md).
  bool nfd = false;
  std::string nfdFile = "/etc/kubernetes/node-feature-discovery/features.d/iommud";
  // [measure]: count each device's DMA mapping work (docs/measure.md "In the daemon") and export it
  // with the Prometheus file every `interval` seconds.
  bool measure = false;
  std::chrono::seconds measureInterval{15};
  // The measured effect of the daemon's own changes: a window this long before each piece of work
  // that changed devices and one after it (docs/measure.md). 0: off.
  std::chrono::seconds effectWindow{0};
};

/// A configuration file read and checked, with everything wrong with it.
struct LoadedConfig {
  DaemonConfig config;                  // defaults where the file says nothing; meaningless unless ok()
  std::vector<Diagnostic> diagnostics;  // FILE:LINE:COL, sorted by position
  [[nodiscard]] bool ok() const;        // no Error diagnostic
};

/// Largest configuration file accepted, and most directories in `policy-dirs`.
inline constexpr size_t kMaxConfigBytes = 64U << 10U;
inline constexpr size_t kMaxPolicyDirs = 16;
/// Largest `debounce-ms`: ten seconds of waiting is already more than any burst of uevents needs.
inline constexpr int kMaxDebounceMs = 10000;
/// Largest `[measure] interval`: an hour; Prometheus scrapes every minute or so.
inline constexpr int kMaxMeasureIntervalS = 3600;
/// Largest `[measure] effect-window`: ten minutes; the effect of a change shows in seconds.
inline constexpr int kMaxEffectWindowS = 600;

/// Pure: parses and validates the text; `fileName` names it in diagnostics. Reports every
/// semantic error, and the first syntax error.
LoadedConfig parseDaemonConfig(std::string_view text, const std::string& fileName);

/// Reads the file (through a plain path; the caller resolves roots). A missing file is not an
/// error: defaults. An unreadable file is an Error diagnostic naming the errno. With
/// `requireOwner` (running as root: 0), the file and its directory must be owned by that uid and
/// not writable by group or others, as policy files (LoadOptions::requireOwner); else an Error.
LoadedConfig loadDaemonConfig(const std::string& path, std::optional<unsigned> requireOwner = std::nullopt);

}  // namespace iommud::config
