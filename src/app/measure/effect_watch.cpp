#include "app/measure/effect_watch.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "app/change/message_ids.hpp"

namespace iommud::app {

namespace {

// Whether a device's maps go through translation, as the host was read: its group's type (docs/kernel.md
// §1.2); no group is no IOMMU in front of it; none when the type could not be read.
std::optional<bool> translatedNow(const core::HostFacts& host, const core::PciDevice& d) {
  if (!d.group) return false;
  const core::Group* g = host.group(*d.group);
  if (g == nullptr || !g->type) return std::nullopt;
  return core::isTranslated(*g->type);
}

core::EffectSubject& subjectFor(std::vector<core::EffectSubject>& out, const core::HostFacts& host,
                                const std::string& address) {
  auto it = std::ranges::find_if(out, [&](const core::EffectSubject& s) { return s.device == address; });
  if (it != out.end()) return *it;
  core::EffectSubject s;
  s.device = address;
  s.name = address;
  if (const core::PciDevice* d = host.device(address)) {
    s.name = d->displayName();
    s.translatedBefore = translatedNow(host, *d);
  }
  s.translatedAfter = s.translatedBefore;
  out.push_back(std::move(s));
  return out.back();
}

std::string fixed(double x, const char* format) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), format, x);
  return buf.data();
}

std::string yesNo(const std::optional<core::DmaSample>& s) {
  if (!s || !s->translated) return "unknown";
  return *s->translated ? "yes" : "no";
}

}  // namespace

std::vector<core::EffectSubject> effectSubjects(const std::vector<Outcome>& outcomes, const core::HostFacts& host) {
  std::vector<core::EffectSubject> out;
  for (const Outcome& o : outcomes) {
    if (o.result != Outcome::Result::Done || o.device.empty()) continue;
    std::vector<std::string> concerned{o.device};
    const auto group = host.withGroup(o.device);
    concerned.insert(concerned.end(), group.begin(), group.end());
    concerned.insert(concerned.end(), o.members.begin(), o.members.end());
    std::optional<bool> after;
    if (o.kind == core::ChangeKind::Domain) {
      if (auto type = core::parseDomainType(o.to)) after = core::isTranslated(*type);
    }
    for (const std::string& address : concerned) {
      core::EffectSubject& s = subjectFor(out, host, address);
      if (o.kind == core::ChangeKind::Domain) s.translatedAfter = after;
    }
  }
  return out;
}

void EffectWatch::sample(double t, core::DmaReading reading) {
  samples_.push_back({t, std::move(reading)});
  // Keep one reading at least a window old (the next before-window's start), none older.
  while (samples_.size() >= 2 && samples_[1].t <= t - window_) samples_.pop_front();
}

void EffectWatch::workStarting(double t, core::DmaReading reading) {
  starting_.reset();
  if (!samples_.empty() && t - samples_.front().t >= window_ / 2) {
    starting_ = core::diffReadings(samples_.front().reading, reading, t - samples_.front().t);
  }
  sample(t, std::move(reading));
}

void EffectWatch::workEnded(double t, core::DmaReading reading, std::vector<core::EffectSubject> subjects,
                            std::string changedAt) {
  std::optional<core::DmaInterval> before = std::move(starting_);
  starting_.reset();
  if (before && !subjects.empty()) {
    pending_.push_back({std::move(*before), Sample{t, reading}, std::move(subjects), std::move(changedAt)});
  }
  sample(t, std::move(reading));
}

std::optional<double> EffectWatch::due() const {
  std::optional<double> next;
  for (const Pending& p : pending_) {
    double at = p.end.t + window_;
    if (!next || at < *next) next = at;
  }
  return next;
}

std::vector<EffectMeasured> EffectWatch::finish(double t, const core::DmaReading& reading, uint64_t pageBytes) {
  std::vector<EffectMeasured> out;
  std::erase_if(pending_, [&](const Pending& p) {
    if (p.end.t + window_ > t) return false;
    auto after = core::diffReadings(p.end.reading, reading, t - p.end.t);
    auto beforeWindow = core::subjectWindow(p.before, p.subjects, false, pageBytes);
    auto afterWindow = core::subjectWindow(after, p.subjects, true, pageBytes);
    std::vector<std::string> devices;
    devices.reserve(p.subjects.size());
    for (const auto& s : p.subjects) devices.push_back(s.device);
    out.push_back({p.changedAt, core::measuredEffects(beforeWindow, afterWindow, devices),
                   beforeWindow.hostMapsPerSecond, afterWindow.hostMapsPerSecond});
    return true;
  });
  return out;
}

adapters::systemd::Entry journalEntry(const core::MeasuredEffect& e, const EffectMeasured& change) {
  using adapters::systemd::Field;
  std::vector<Field> fields{{"IOMMUD_DEVICE", e.device},
                            {"IOMMUD_NAME", e.name},
                            {"IOMMUD_CHANGED_AT", change.changedAt},
                            {"IOMMUD_SECONDS_BEFORE", fixed(e.beforeSeconds, "%.1f")},
                            {"IOMMUD_SECONDS_AFTER", fixed(e.afterSeconds, "%.1f")},
                            {"IOMMUD_MAPS_ATTRIBUTED", e.mapsAttributed ? "yes" : "no"},
                            {"IOMMUD_TRANSLATED_BEFORE", yesNo(e.before)},
                            {"IOMMUD_TRANSLATED_AFTER", yesNo(e.after)},
                            {"IOMMUD_HOST_IOMMU_MAPS_PER_S_BEFORE", fixed(change.hostMapsBefore, "%.0f")},
                            {"IOMMUD_HOST_IOMMU_MAPS_PER_S_AFTER", fixed(change.hostMapsAfter, "%.0f")}};
  auto side = [&](const std::optional<core::DmaSample>& s, const std::string& suffix) {
    if (!s) return;
    if (e.mapsAttributed) {
      fields.push_back({"IOMMUD_MAPS_PER_S_" + suffix, fixed(s->mapsPerSecond, "%.0f")});
      if (s->meanMapBytes) fields.push_back({"IOMMUD_MEAN_MAP_BYTES_" + suffix, fixed(*s->meanMapBytes, "%.0f")});
    }
    fields.push_back({"IOMMUD_BOUNCES_PER_S_" + suffix, fixed(s->bouncesPerSecond, "%.0f")});
    fields.push_back({"IOMMUD_FAULTS_" + suffix, std::to_string(s->faults)});
  };
  side(e.before, "BEFORE");
  side(e.after, "AFTER");
  core::DmaWindow b;
  core::DmaWindow a;
  b.hostMapsPerSecond = change.hostMapsBefore;
  a.hostMapsPerSecond = change.hostMapsAfter;
  return {adapters::systemd::Priority::Info, std::string(msgid::kMeasured),
          "measured effect of the change: " + core::describe(e) + "; " + core::describeHost(b, a), std::move(fields)};
}

std::vector<adapters::dbus::EffectView> effectViews(const EffectMeasured& change) {
  std::vector<adapters::dbus::EffectView> out;
  for (const auto& e : change.effects) {
    adapters::dbus::EffectView v;
    v.device = e.device;
    v.name = e.name;
    v.secondsBefore = e.beforeSeconds;
    v.secondsAfter = e.afterSeconds;
    v.mapsAttributed = e.mapsAttributed;
    if (e.before) {
      v.mapsBefore = e.before->mapsPerSecond;
      v.bouncesBefore = e.before->bouncesPerSecond;
    }
    if (e.after) {
      v.mapsAfter = e.after->mapsPerSecond;
      v.bouncesAfter = e.after->bouncesPerSecond;
    }
    v.translatedBefore = yesNo(e.before);
    v.translatedAfter = yesNo(e.after);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace iommud::app
