#include "app/report/top.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "app/report/json_writer.hpp"
#include "app/report/text_style.hpp"

namespace iommud::app {

using core::DmaEvent;
using core::DmaSortKey;

std::string_view toString(DmaSortKey key) {
  return core::nameOf(core::kDmaSortKeyNames, key);
}

std::optional<DmaSortKey> sortKeyFor(char key) {
  switch (key) {
    case 'm': return DmaSortKey::Maps;
    case 'b': return DmaSortKey::MiB;
    case 's': return DmaSortKey::MeanSize;
    case 'o': return DmaSortKey::Bounces;
    case 'f': return DmaSortKey::Faults;
    case 'd': return DmaSortKey::Device;
    default: return std::nullopt;
  }
}

namespace {

bool absent(const TopView& view, DmaEvent event) {
  return std::ranges::find(view.absent, event) != view.absent.end();
}

}  // namespace

std::string unattributedNote(const TopView& view) {
  std::vector<std::string> notes;
  if (!view.interval.mapsAttributed) {
    notes.emplace_back(
        "this kernel has no dma:* tracepoints (they came in Linux 6.12): maps cannot be attributed to "
        "devices; bounces and faults are per device, IOMMU maps and unmaps host-wide only");
  }
  if (absent(view, DmaEvent::Bounced)) notes.emplace_back("no swiotlb:swiotlb_bounced event: bounces are not counted");
  if (absent(view, DmaEvent::PageFault)) notes.emplace_back("no iommu:io_page_fault event: faults are not counted");
  if (absent(view, DmaEvent::IommuMap)) notes.emplace_back("no iommu:map event: host-wide IOMMU maps are not counted");
  if (view.interval.dropped > 0) {
    notes.push_back(fmt::format("{} events were not counted: a histogram table is full", view.interval.dropped));
  }
  if (view.interval.restarted) notes.emplace_back("the counters restarted during this interval");
  std::string out;
  for (const auto& n : notes) out += (out.empty() ? "" : "; ") + n;
  return out;
}

std::string topJson(const TopView& view) {
  const auto& iv = view.interval;
  bool attributed = iv.mapsAttributed;
  JsonWriter w;
  w.beginObject();
  w.field("schema_version", 1);
  w.field("kernel", view.kernel);
  w.field("seconds", iv.seconds);
  w.field("maps_attributed", attributed);
  std::string note = unattributedNote(view);
  w.key("note");
  if (note.empty()) {
    w.null();
  } else {
    w.value(note);
  }
  w.field("restarted", iv.restarted);
  w.field("dropped", iv.dropped);
  w.key("host").beginObject();
  auto hostCount = [&](std::string_view name, uint64_t n, DmaEvent event) {
    w.key(name);
    if (absent(view, event)) {
      w.null();
    } else {
      w.value(n);
    }
  };
  hostCount("iommu_maps", iv.host.maps, DmaEvent::IommuMap);
  hostCount("iommu_mapped_bytes", iv.host.mappedBytes, DmaEvent::IommuMap);
  hostCount("iommu_unmaps", iv.host.unmaps, DmaEvent::IommuUnmap);
  hostCount("iommu_unmapped_bytes", iv.host.unmappedBytes, DmaEvent::IommuUnmap);
  w.field("iommu_maps_per_second", iv.hostMapsPerSecond);
  w.field("iommu_unmaps_per_second", iv.hostUnmapsPerSecond);
  w.endObject();
  w.key("devices").beginArray();
  for (const core::DmaRow& r : view.rows) {
    const auto& d = r.dma;
    w.beginObject();
    w.field("device", d.device);
    w.field("name", r.name);
    w.key("driver");
    if (r.driver.empty()) {
      w.null();
    } else {
      w.value(r.driver);
    }
    w.field("group", r.group);
    w.key("domain");
    if (r.domain) {
      w.value(core::toString(*r.domain));
    } else {
      w.null();
    }
    w.field("translated", r.translated);
    w.field("untrusted", r.untrusted);
    w.field("present", r.present);
    auto mapCount = [&](std::string_view name, uint64_t n) {
      w.key(name);
      if (attributed) {
        w.value(n);
      } else {
        w.null();
      }
    };
    auto mapRate = [&](std::string_view name, double x) {
      w.key(name);
      if (attributed) {
        w.value(x);
      } else {
        w.null();
      }
    };
    mapCount("maps", d.delta.maps);
    mapCount("unmaps", d.delta.unmaps);
    mapCount("mapped_bytes", d.delta.mappedBytes);
    mapCount("sg_maps", d.delta.sgMaps);
    mapCount("sg_entries", d.delta.sgEntries);
    mapRate("maps_per_second", d.mapsPerSecond);
    mapRate("unmaps_per_second", d.unmapsPerSecond);
    mapRate("mapped_mib_per_second", d.mappedMiBPerSecond);
    w.key("mean_map_bytes");
    if (attributed && d.meanMapBytes) {
      w.value(*d.meanMapBytes);
    } else {
      w.null();
    }
    w.key("bounces");
    if (absent(view, DmaEvent::Bounced)) {
      w.null();
    } else {
      w.value(d.delta.bounces);
    }
    w.field("bounced_bytes", d.delta.bouncedBytes);
    w.field("bounces_per_second", d.bouncesPerSecond);
    w.key("faults");
    if (absent(view, DmaEvent::PageFault)) {
      w.null();
    } else {
      w.value(d.delta.faults);
    }
    w.endObject();
  }
  w.endArray();
  w.endObject();
  return w.take("\n");
}

namespace {

std::string rate(double x) {
  if (x == 0) return "0";
  if (x < 10) return fmt::format("{:.1f}", x);
  return fmt::format("{:.0f}", x);
}

std::string domainCell(const core::DmaRow& r) {
  std::string d = r.domain ? std::string(core::toString(*r.domain)) : (r.group ? "?" : "none");
  if (r.untrusted) d += " untrusted";
  return d;
}

bool busy(const core::DmaRow& r) {
  const auto& c = r.dma.delta;
  return c.maps + c.unmaps + c.bounces + c.faults > 0;
}

}  // namespace

std::string topTable(const TopView& view, DmaSortKey sort, bool color, bool all, size_t width) {
  Style s{color, width};
  const auto& iv = view.interval;
  std::string out;
  out += s.bold(fmt::format("IOMMU maps/s {}  unmaps/s {}  ({} s, kernel {}, sorted by {})", rate(iv.hostMapsPerSecond),
                            rate(iv.hostUnmapsPerSecond), rate(iv.seconds), view.kernel, toString(sort)));
  out += "\n";
  if (std::string note = unattributedNote(view); !note.empty())
    out += s.yellow(wrapText("note: " + note, 6, s.proseWidth())) + "\n";
  out += s.bold(fmt::format("{:<13} {:<10} {:<9} {:>5} {:<18} {:>9} {:>8} {:>9} {:>9} {:>7}", "DEVICE", "NAME",
                            "DRIVER", "GROUP", "DOMAIN", "MAPS/s", "MiB/s", "MEAN B", "BOUNCE/s", "FAULTS"));
  out += "\n";
  auto rows = view.rows;
  core::sortRows(rows, sort);
  bool attributed = iv.mapsAttributed;
  for (const core::DmaRow& r : rows) {
    if (!all && !busy(r) && r.present) continue;
    const auto& d = r.dma;
    std::string line = fmt::format(
        "{:<13} {:<10} {:<9} {:>5} {:<18} {:>9} {:>8} {:>9} {:>9} {:>7}", d.device, r.name.substr(0, 10),
        r.driver.substr(0, 9), r.group ? std::to_string(*r.group) : "-", domainCell(r),
        attributed ? rate(d.mapsPerSecond) : "-", attributed ? rate(d.mappedMiBPerSecond) : "-",
        attributed && d.meanMapBytes ? rate(*d.meanMapBytes) : "-", rate(d.bouncesPerSecond), d.delta.faults);
    if (!r.present) line += " (gone)";
    out += (r.untrusted && d.delta.bounces > 0) ? s.red(line) : line;
    out += "\n";
  }
  return fitLines(out, width);
}

}  // namespace iommud::app
