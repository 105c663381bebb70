#include "core/measured_effect.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>

namespace iommud::core {

namespace {

const DmaRow* presentRow(const DmaWindow& w, const std::string& device) {
  auto it = std::ranges::find_if(w.rows, [&](const DmaRow& r) { return r.dma.device == device; });
  return it == w.rows.end() || !it->present ? nullptr : &*it;
}

DmaSample sampleOf(const DmaRow& r) {
  return {r.dma.mapsPerSecond, r.dma.meanMapBytes, r.dma.bouncesPerSecond, r.dma.delta.faults, r.translated};
}

std::string decimal(double x) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.1f", x);
  return buf.data();
}

std::string rounded(double x) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.0f", x);
  return buf.data();
}

std::string translation(const std::optional<DmaSample>& s) {
  if (!s) return "absent";
  if (!s->translated) return "unknown";
  return *s->translated ? "translated" : "not translated";
}

std::string mean(const std::optional<DmaSample>& s) {
  return s && s->meanMapBytes ? rounded(*s->meanMapBytes) : "-";
}

std::string rate(const std::optional<DmaSample>& s, double DmaSample::*field) {
  return s ? rounded((*s).*field) : "-";
}

}  // namespace

std::vector<MeasuredEffect> measuredEffects(const DmaWindow& before, const DmaWindow& after,
                                            const std::vector<std::string>& devices) {
  std::vector<MeasuredEffect> out;
  std::set<std::string, std::less<>> seen;
  for (const std::string& device : devices) {
    if (!seen.insert(device).second) continue;
    const DmaRow* b = presentRow(before, device);
    const DmaRow* a = presentRow(after, device);
    if (b == nullptr && a == nullptr) continue;
    MeasuredEffect e;
    e.device = device;
    e.name = a != nullptr ? a->name : b->name;
    e.beforeSeconds = before.seconds;
    e.afterSeconds = after.seconds;
    e.mapsAttributed = before.mapsAttributed && after.mapsAttributed;
    if (b != nullptr) e.before = sampleOf(*b);
    if (a != nullptr) e.after = sampleOf(*a);
    out.push_back(std::move(e));
  }
  return out;
}

std::string describe(const MeasuredEffect& e) {
  std::string text = e.name + ": ";
  if (e.mapsAttributed) {
    text += rate(e.before, &DmaSample::mapsPerSecond) + " -> " + rate(e.after, &DmaSample::mapsPerSecond) +
            " maps/s, mean " + mean(e.before) + " -> " + mean(e.after) + " bytes, ";
  } else {
    text += "maps not attributed to devices by this kernel (before 6.12), ";
  }
  text += translation(e.before) + " -> " + translation(e.after) + ", " + rate(e.before, &DmaSample::bouncesPerSecond) +
          " -> " + rate(e.after, &DmaSample::bouncesPerSecond) + " bounces/s";
  uint64_t faults = (e.before ? e.before->faults : 0) + (e.after ? e.after->faults : 0);
  if (faults > 0) {
    text += ", IOMMU faults " + (e.before ? std::to_string(e.before->faults) : "-") + " -> " +
            (e.after ? std::to_string(e.after->faults) : "-");
  }
  return text + " (" + decimal(e.beforeSeconds) + " s before, " + decimal(e.afterSeconds) + " s after)";
}

std::string describeHost(const DmaWindow& before, const DmaWindow& after) {
  return "host: " + rounded(before.hostMapsPerSecond) + " -> " + rounded(after.hostMapsPerSecond) +
         " IOMMU page maps/s";
}

DmaWindow subjectWindow(const DmaInterval& interval, const std::vector<EffectSubject>& subjects, bool afterChange,
                        uint64_t pageBytes) {
  DmaWindow window;
  window.seconds = interval.seconds;
  window.mapsAttributed = interval.mapsAttributed;
  window.hostMapsPerSecond = interval.hostMapsPerSecond;
  window.pageBytes = pageBytes;
  for (const EffectSubject& s : subjects) {
    DmaRow row;
    row.dma.device = s.device;
    auto it = std::ranges::find_if(interval.devices, [&](const DeviceDmaDelta& d) { return d.device == s.device; });
    if (it != interval.devices.end()) row.dma = *it;
    row.name = s.name;
    row.translated = afterChange ? s.translatedAfter : s.translatedBefore;
    window.rows.push_back(std::move(row));
  }
  return window;
}

}  // namespace iommud::core
