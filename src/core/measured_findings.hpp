#pragma once

#include <string>
#include <vector>

#include "core/dma_stats.hpp"
#include "core/findings.hpp"

// Findings that carry what was measured (`iommuctl status --measure N`, docs/measure.md): the
// numbers of a window of DMA counting put into the static findings, and a finding of their own.

namespace iommud::core {

/// What a window of counting saw.
struct DmaWindow {
  double seconds = 0;
  bool mapsAttributed = false;
  std::vector<DmaRow> rows;
  double hostMapsPerSecond = 0;
};

/// A translated device mapping many small buffers: at least kSmallMapsRate maps/s with a mean
/// mapping below kSmallMapsBytes (the AQC100 pattern).
inline constexpr std::string_view kSmallMapsId = "small-dma-maps";
inline constexpr double kSmallMapsRate = 1000;
inline constexpr double kSmallMapsBytes = 2048;

/// Adds the window's numbers to `untrusted-bounce` (bounces of its devices) and
/// `vtd-iotlb-sync-map` (the map rate of its groups), and adds a `small-dma-maps` finding per
/// device that shows the pattern.
void addMeasurements(std::vector<Finding>& findings, const DmaWindow& window);

/// "No DMA mapping work in 5 s: ..." when the window saw none at all; empty otherwise.
std::string quietWindow(const DmaWindow& window);

}  // namespace iommud::core
