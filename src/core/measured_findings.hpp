#pragma once

#include <cstdint>
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
  /// The measured host's page size (sysconf(_SC_PAGESIZE) where it was counted): 4096 on x86, 4096,
  /// 16384 or 65536 on arm64 as the kernel was configured. 0: unknown, and no small-dma-maps.
  uint64_t pageBytes = 0;
};

/// A translated device mapping many small buffers: at least kSmallMapsRate maps/s with a mean
/// mapping below kSmallMapsPageFraction of a page (the AQC100 pattern; 2048 bytes on 4 KiB pages).
/// A page, not a byte count: the IOMMU maps whole pages, so the waste and the per-map cost are
/// relative to it, and arm64 kernels run with 16 KiB and 64 KiB pages too.
inline constexpr std::string_view kSmallMapsId = "small-dma-maps";
inline constexpr double kSmallMapsRate = 1000;
inline constexpr double kSmallMapsPageFraction = 0.5;

/// Adds the window's numbers to `untrusted-bounce` (bounces of its devices) and
/// `vtd-iotlb-sync-map` (the map rate of its groups), and adds a `small-dma-maps` finding per
/// device that shows the pattern.
void addMeasurements(std::vector<Finding>& findings, const DmaWindow& window);

/// "No DMA mapping work in 5 s: ..." when the window saw none at all; empty otherwise.
std::string quietWindow(const DmaWindow& window);

}  // namespace iommud::core
