#include "core/measured_findings.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace iommud::core {

namespace {

std::string number(double x) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), x < 10 ? "%.1f" : "%.0f", x);
  return buf.data();
}

std::string over(const DmaWindow& w) {
  return "Measured over " + number(w.seconds) + " s: ";
}

const DmaRow* rowOf(const DmaWindow& w, const std::string& device) {
  auto it = std::ranges::find_if(w.rows, [&](const DmaRow& r) { return r.dma.device == device; });
  return it == w.rows.end() ? nullptr : &*it;
}

void addBounces(Finding& f, const DmaWindow& w) {
  std::string text;
  for (const std::string& device : f.devices) {
    const DmaRow* r = rowOf(w, device);
    if (r == nullptr) continue;
    if (!text.empty()) text += "; ";
    text +=
        r->name + " " + std::to_string(r->dma.delta.bounces) + " bounces (" + number(r->dma.bouncesPerSecond) + "/s)";
  }
  if (!text.empty()) f.summary += " " + over(w) + text + ".";
}

void addGroupRate(Finding& f, const DmaWindow& w) {
  if (!w.mapsAttributed) {
    f.summary += " " + over(w) + "this kernel cannot attribute maps to devices; the host maps " +
                 number(w.hostMapsPerSecond) + " IOMMU pages/s in all.";
    return;
  }
  for (int group : f.groups) {
    double rate = 0;
    for (const DmaRow& r : w.rows) {
      if (r.group == group) rate += r.dma.mapsPerSecond;
    }
    f.summary += " " + over(w) + "group " + std::to_string(group) + " maps " + number(rate) + " times/s.";
  }
}

Finding smallMaps(const DmaRow& r, const DmaWindow& w) {
  Finding f;
  f.id = std::string(kSmallMapsId);
  f.severity = Severity::Warning;
  f.title = r.name + " maps many small buffers through the IOMMU";
  f.summary = over(w) + r.name + (r.driver.empty() ? "" : " (" + r.driver + ")") + " mapped " +
              number(r.dma.mapsPerSecond) + " buffers/s with a mean of " + number(r.dma.meanMapBytes.value_or(0)) +
              " bytes (pages of " + std::to_string(w.pageBytes) + "), through translation (" +
              (r.domain ? std::string(toString(*r.domain)) : "?") +
              "). Each map and unmap updates the IOMMU page table and invalidates its TLB, whatever the size: "
              "fewer, larger mappings cost less, with the same protection.";
  f.devices = {r.dma.device};
  if (r.group) f.groups = {*r.group};
  const std::string none = "none: DMA stays translated and confined to the buffers the driver maps";
  f.remedies.push_back({"Larger RX/TX rings (`ethtool -G`) so that the driver refills in batches", none});
  f.remedies.push_back({"Interrupt coalescing (`ethtool -C ... rx-usecs`) so that each interrupt handles more", none});
  f.remedies.push_back({"Larger RX buffers where the driver offers them (`ethtool -G ... rx-buf-len`)", none});
  return f;
}

}  // namespace

void addMeasurements(std::vector<Finding>& findings, const DmaWindow& window) {
  for (Finding& f : findings) {
    if (f.id == "untrusted-bounce") addBounces(f, window);
    if (f.id == "vtd-iotlb-sync-map") addGroupRate(f, window);
  }
  if (!window.mapsAttributed || window.pageBytes == 0) return;
  const double small = kSmallMapsPageFraction * static_cast<double>(window.pageBytes);
  for (const DmaRow& r : window.rows) {
    if (r.translated == true && r.dma.mapsPerSecond >= kSmallMapsRate && r.dma.meanMapBytes &&
        *r.dma.meanMapBytes < small) {
      findings.push_back(smallMaps(r, window));
    }
  }
}

std::string quietWindow(const DmaWindow& window) {
  bool busy = window.hostMapsPerSecond > 0 || std::ranges::any_of(window.rows, [](const DmaRow& r) {
                const auto& c = r.dma.delta;
                return c.maps + c.unmaps + c.bounces + c.faults > 0;
              });
  if (busy) return {};
  return "No DMA mapping work in " + number(window.seconds) +
         " s: nothing to measure, so the findings say what the host's facts predict, not what it does.";
}

}  // namespace iommud::core
