#pragma once

#include <string>

#include "adapters/sysfs/root.hpp"
#include "core/dma_stats.hpp"
#include "core/measured_findings.hpp"

// The loop of `iommuctl top`: arm the counters, read them each interval, re-read the host (so
// hotplug shows), print, and remove the instance on every way out (docs/measure.md "Cleanup").

namespace iommud::app {

struct TopOptions {
  double seconds = 1.0;  // the interval
  bool once = false;     // one interval, then exit
  bool json = false;
  bool all = false;    // show devices without work too
  std::string device;  // only this one (an address; empty: all)
  core::DmaSortKey sort = core::DmaSortKey::Maps;
  bool color = false;
};

/// Runs top; returns the exit code. Errors are printed as one line each.
int runTop(const adapters::sysfs::Root& root, const TopOptions& options);

/// Counts for `seconds` (`status --measure`): the window joined with `host`. A signal ends it
/// early (EINTR); the instance is removed either way. An error's text is one line for people.
core::Result<core::DmaWindow> measureWindow(const adapters::sysfs::Root& root, double seconds,
                                            const core::HostFacts& host);

}  // namespace iommud::app
