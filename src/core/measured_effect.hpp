#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/measured_findings.hpp"

// The measured effect of a change (`iommuctl apply --measure N`, docs/measure.md "Before and
// after"): one window of DMA mapping work before the change and one after it, per device the
// change concerned. Pure: two windows in, numbers and words out.

namespace iommud::core {

/// What one device did in one window.
struct DmaSample {
  double mapsPerSecond = 0;
  std::optional<double> meanMapBytes;  // none without single-page maps
  double bouncesPerSecond = 0;
  uint64_t faults = 0;
  /// Whether its maps went through translation (the group's type); none when unknown.
  std::optional<bool> translated;

  bool operator==(const DmaSample&) const = default;
};

struct MeasuredEffect {
  std::string device;  // PCI address
  std::string name;    // "nvme0"
  double beforeSeconds = 0;
  double afterSeconds = 0;
  bool mapsAttributed = false;      // false: the kernel cannot attribute maps (before 6.12)
  std::optional<DmaSample> before;  // none: the device was not on the host then
  std::optional<DmaSample> after;

  bool operator==(const MeasuredEffect&) const = default;
};

/// One effect per device of `devices` (in that order, each once) that either window knows.
std::vector<MeasuredEffect> measuredEffects(const DmaWindow& before, const DmaWindow& after,
                                            const std::vector<std::string>& devices);

/// "nvme0: 8123 maps/s -> 8090 maps/s, mean 4096 -> 4096 bytes, translated -> not translated,
/// 0 -> 0 bounces/s (5.0 s each)"; the words say when the kernel cannot attribute maps.
std::string describe(const MeasuredEffect& effect);

/// "host: 3175 -> 2 IOMMU page maps/s": what the IOMMU mapped in all, before and after (the one
/// figure a kernel before 6.12 gives: a change that takes a busy device out of translation shows
/// here).
std::string describeHost(const DmaWindow& before, const DmaWindow& after);

/// A device a change concerned (the device changed, or another of its group), as the daemon's
/// worker saw it: whether its maps went through translation before and after the change. The
/// daemon keeps no host facts of its own; this is what it needs of them to measure the effect.
struct EffectSubject {
  std::string device;  // PCI address
  std::string name;    // "nvme0"; the address when there is no better name
  std::optional<bool> translatedBefore;
  std::optional<bool> translatedAfter;

  bool operator==(const EffectSubject&) const = default;
};

/// The window `interval` counted, as its rows for the subjects only (`afterChange`: with their
/// translation after the change, else before it). A subject without work in the interval gets a
/// row of zeros: it was on the host and did nothing.
DmaWindow subjectWindow(const DmaInterval& interval, const std::vector<EffectSubject>& subjects, bool afterChange,
                        uint64_t pageBytes);

}  // namespace iommud::core
