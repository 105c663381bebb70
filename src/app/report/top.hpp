#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/report/text_style.hpp"
#include "core/dma_stats.hpp"

// What `iommuctl top` shows (docs/measure.md): one interval of DMA mapping work per device, as a
// table for people and as JSON (docs/schema/top.schema.json). Rendering only; the loop that
// reads the kernel is in top_run.

namespace iommud::app {

struct TopView {
  std::string kernel;  // the release, as /proc/sys/kernel/osrelease says
  core::DmaInterval interval;
  std::vector<core::DmaRow> rows;
  std::vector<core::DmaEvent> absent;  // events this kernel does not have
};

/// What the kernel cannot tell, in words; empty when everything is counted.
std::string unattributedNote(const TopView& view);

/// The JSON document of one interval (docs/schema/top.schema.json).
std::string topJson(const TopView& view);

/// The table: a header line with the host-wide IOMMU rates, the note of what cannot be attributed,
/// then one line per device (those without any work left out unless `all`).
std::string topTable(const TopView& view, core::DmaSortKey sort, bool color, bool all = false,
                     size_t width = kTextWidth);

/// The sort key a key press selects ('m' maps, 'b' MiB, 's' mean size, 'o' bounces, 'f' faults,
/// 'd' device); nullopt for other keys.
std::optional<core::DmaSortKey> sortKeyFor(char key);
std::string_view toString(core::DmaSortKey key);

}  // namespace iommud::app
