#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "adapters/sysfs/root.hpp"
#include "app/report/text_style.hpp"
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
  size_t width = kTextWidth;  // the columns of its table (app/report/text_style.hpp)
};

/// Why `who` ("top") cannot measure, in one line for people; a refusal says who may measure.
std::string whyNotMeasuring(std::string_view who, const core::Error& e);

/// Runs top; returns the exit code. Errors are printed as one line each.
int runTop(const adapters::sysfs::Root& root, const TopOptions& options);

/// Counts for `seconds` (`status --measure`): the window joined with `host`. A signal ends it
/// early (EINTR); the instance is removed either way. An error's text is one line for people.
core::Result<core::DmaWindow> measureWindow(const adapters::sysfs::Root& root, double seconds,
                                            const core::HostFacts& host);

/// The two windows of `apply --measure` (docs/measure.md "Before and after").
struct MeasuredChange {
  core::DmaWindow before;  // joined with the host as it was
  core::DmaWindow after;   // joined with the host `change` read after it acted
};

/// Counts for `seconds`, runs `change` (which makes the change and returns the host read afresh
/// after it), then counts for `seconds` again, with the same triggers. The time `change` takes is
/// in neither window. A signal during the first window ends it with EINTR before `change` runs;
/// the caller learns from its own `change` whether it ran.
core::Result<MeasuredChange> measureAround(const adapters::sysfs::Root& root, double seconds,
                                           const core::HostFacts& host,
                                           const std::function<core::Result<core::HostFacts>()>& change);

}  // namespace iommud::app
