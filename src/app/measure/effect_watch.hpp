#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "adapters/systemd/log.hpp"
#include "app/change/outcome.hpp"
#include "core/dma_stats.hpp"
#include "core/host.hpp"
#include "core/measured_effect.hpp"

// The measured effect of the daemon's own changes ([measure] effect-window, docs/measure.md "The
// effect of the daemon's changes"): a window of counting before a piece of work that changed
// devices and one after it, per device the change concerned, logged and signalled on D-Bus. The
// daemon reads the counters; everything here is pure (readings and monotonic times in).

namespace iommud::app {

/// The devices that done changes concerned, each once: the device changed and the other devices
/// of its group (a domain change moves the whole group), with whether their maps went through
/// translation before (the host as planned) and after (a domain change's new type; any other
/// change leaves it as it was).
std::vector<core::EffectSubject> effectSubjects(const std::vector<Outcome>& outcomes, const core::HostFacts& host);

/// What one change's two windows showed.
struct EffectMeasured {
  std::string changedAt;  // UTC, when the work that made the change ended (its Actions' time)
  std::vector<core::MeasuredEffect> effects;
  double hostMapsBefore = 0;  // IOMMU page maps/s, host-wide (the one figure before 6.12)
  double hostMapsAfter = 0;
  bool operator==(const EffectMeasured&) const = default;
};

class EffectWatch {
 public:
  /// `windowSeconds`: how long each window counts (> 0).
  explicit EffectWatch(double windowSeconds) : window_(windowSeconds) {}

  /// A reading of the counters at `t` (monotonic seconds). Keeps what the next before-window needs.
  void sample(double t, core::DmaReading reading);
  /// A piece of work that may change devices starts: the reading just taken ends its before-window,
  /// which begins at the newest reading at least a window older (or the oldest there is, when the
  /// daemon has not counted that long).
  void workStarting(double t, core::DmaReading reading);
  /// The work that started last ended at `t` (reading just taken) having changed `subjects`; with
  /// none, or without a before-window of at least half a window, there is nothing to measure.
  void workEnded(double t, core::DmaReading reading, std::vector<core::EffectSubject> subjects, std::string changedAt);
  /// When the next after-window ends; none when no change waits for one.
  [[nodiscard]] std::optional<double> due() const;
  /// The changes whose after-window ended by `t`, with the reading taken at `t`.
  std::vector<EffectMeasured> finish(double t, const core::DmaReading& reading, uint64_t pageBytes);

  [[nodiscard]] double window() const { return window_; }

 private:
  struct Sample {
    double t = 0;
    core::DmaReading reading;
  };
  struct Pending {
    core::DmaInterval before;
    Sample end;
    std::vector<core::EffectSubject> subjects;
    std::string changedAt;
  };
  double window_;
  std::deque<Sample> samples_;                 // oldest first; the first is the window's start
  std::optional<core::DmaInterval> starting_;  // the before-window of the work under way
  std::vector<Pending> pending_;
};

/// The journal entry of one device's measured effect: MESSAGE_ID kMeasured, the numbers as
/// IOMMUD_* fields (docs/measure.md lists them), describe()'s words as the message.
adapters::systemd::Entry journalEntry(const core::MeasuredEffect& effect, const EffectMeasured& change);

/// The Measured signal's rows.
std::vector<adapters::dbus::EffectView> effectViews(const EffectMeasured& change);

}  // namespace iommud::app
