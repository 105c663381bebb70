#include "core/dma_stats.hpp"

#include <algorithm>
#include <charconv>

#include "core/text.hpp"

namespace iommud::core {

namespace {

Error lineError(size_t line, std::string message) {
  return Error{EINVAL, "", "line " + std::to_string(line) + ": " + std::move(message)};
}

std::optional<uint64_t> parseCount(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "Hits: 10258" inside the Totals block.
bool parseTotal(std::string_view line, std::string_view label, uint64_t& out) {
  line = trim(line);
  if (!line.starts_with(label)) return false;
  auto n = parseCount(trim(line.substr(label.size())));
  if (!n) return false;
  out = *n;
  return true;
}

// `{ device: 0000:01:00.0      } hitcount:      10258  size:   42016768`
Result<HistEntry> parseEntry(std::string_view line, size_t lineNo, std::string& keyField) {
  auto close = line.find('}');
  if (close == std::string_view::npos) return lineError(lineNo, "a histogram entry without '}'");
  std::string_view key = trim(line.substr(1, close - 1));
  auto colon = key.find(':');
  if (colon == std::string_view::npos) return lineError(lineNo, "a key without a field name");
  std::string_view field = trim(key.substr(0, colon));
  // Several keys read "{ device: 0000:01:00.0, dir: 1 }"; a device name holds no ", ".
  if (field.empty() || key.find(", ") != std::string_view::npos) {
    return lineError(lineNo, "not a single-key histogram entry");
  }
  if (keyField.empty()) keyField = std::string(field);
  if (field != keyField) return lineError(lineNo, "key field " + std::string(field) + " after " + keyField);
  HistEntry entry;
  entry.key = std::string(trim(key.substr(colon + 1)));
  auto tokens = words(line.substr(close + 1));
  if (tokens.empty() || tokens.size() % 2 != 0) return lineError(lineNo, "values not in name: number pairs");
  for (size_t i = 0; i < tokens.size(); i += 2) {
    std::string_view name = tokens[i];
    if (!name.ends_with(':')) return lineError(lineNo, "a value name without ':'");
    auto v = parseCount(tokens[i + 1]);
    if (!v) return lineError(lineNo, "not a count: " + std::string(tokens[i + 1]));
    entry.values.emplace(std::string(name.substr(0, name.size() - 1)), *v);
  }
  return entry;
}

}  // namespace

Result<Hist> parseHist(std::string_view text) {
  Hist hist;
  bool header = false;
  bool totals = false;
  bool sawHits = false;
  size_t lineNo = 0;
  for (std::string_view line : split(text, '\n')) {
    ++lineNo;
    std::string_view t = trim(line);
    if (t.empty()) continue;
    if (t.starts_with("#")) {
      header = header || t.find("event histogram") != std::string_view::npos;
      continue;
    }
    if (t.starts_with("{")) {
      if (totals) return lineError(lineNo, "an entry after the totals");
      auto entry = parseEntry(t, lineNo, hist.keyField);
      if (!entry) return entry.error();
      hist.entries.push_back(std::move(*entry));
      continue;
    }
    if (t == "Totals:") {
      totals = true;
      continue;
    }
    uint64_t ignored = 0;
    if (totals && parseTotal(t, "Hits:", hist.hits)) {
      sawHits = true;
      continue;
    }
    if (totals && (parseTotal(t, "Dropped:", hist.dropped) || parseTotal(t, "Entries:", ignored))) continue;
    return lineError(lineNo, "unexpected text: " + std::string(t.substr(0, 60)));
  }
  if (!header) return Error{EINVAL, "", "not a histogram (no '# event histogram' header)"};
  if (!sawHits) return Error{EINVAL, "", "no totals (the file was cut short)"};
  return hist;
}

bool EventFormat::has(std::string_view field) const {
  return std::ranges::any_of(fields, [&](const EventField& f) { return f.name == field; });
}

Result<EventFormat> parseEventFormat(std::string_view text) {
  EventFormat format;
  size_t lineNo = 0;
  for (std::string_view line : split(text, '\n')) {
    ++lineNo;
    std::string_view t = trim(line);
    if (t.starts_with("name:")) {
      format.name = std::string(trim(t.substr(5)));
    } else if (t.starts_with("ID:")) {
      auto id = parseCount(trim(t.substr(3)));
      if (!id) return lineError(lineNo, "not an event id");
      format.id = static_cast<int>(*id);
    } else if (t.starts_with("field:")) {
      // "field:__data_loc char[] device;" or "field:char comm[16];": the name is the last
      // identifier, an array's brackets go with the type.
      std::string_view decl = t.substr(6);
      decl = trim(decl.substr(0, decl.find(';')));
      std::string suffix;
      if (decl.ends_with(']')) {
        auto open = decl.rfind('[');
        suffix = std::string(decl.substr(open));
        decl = trim(decl.substr(0, open));
      }
      auto space = decl.find_last_of(" \t*");
      if (space == std::string_view::npos) return lineError(lineNo, "a field without a type");
      std::string_view name = decl.substr(space + 1);
      std::string type = std::string(trim(decl.substr(0, space + 1))) + suffix;
      if (name.empty()) return lineError(lineNo, "a field without a name");
      format.fields.push_back({std::string(name), std::move(type)});
    }
  }
  if (format.name.empty()) return Error{EINVAL, "", "not an event format (no 'name:' line)"};
  return format;
}

std::string DmaEventSpec::trigger() const {
  std::string t = "hist:keys=" + std::string(key) + ":vals=hitcount";
  if (!value.empty()) t += "," + std::string(value);
  return t;
}

const std::array<DmaEventSpec, kDmaEventCount>& dmaEventSpecs() {
  // docs/kernel.md §10: the fields as Debian's 6.1 and 6.12 print them, and the names of 6.18.
  static const std::array<DmaEventSpec, kDmaEventCount> specs{{
      {DmaEvent::MapPage, "dma", "dma_map_page", "dma_map_phys", "device", "size"},
      {DmaEvent::UnmapPage, "dma", "dma_unmap_page", "dma_unmap_phys", "device", ""},
      {DmaEvent::MapSg, "dma", "dma_map_sg", "", "device", "full_ents"},
      {DmaEvent::UnmapSg, "dma", "dma_unmap_sg", "", "device", ""},
      {DmaEvent::Bounced, "swiotlb", "swiotlb_bounced", "", "dev_name", "size"},
      {DmaEvent::PageFault, "iommu", "io_page_fault", "", "device", ""},
      {DmaEvent::IommuMap, "iommu", "map", "", "common_type", "size"},
      {DmaEvent::IommuUnmap, "iommu", "unmap", "", "common_type", "unmapped_size"},
  }};
  return specs;
}

std::vector<std::string_view> DmaEventSpec::names() const {
  if (renamed.empty()) return {name};
  return {renamed, name};
}

const DmaEventSpec& specOf(DmaEvent event) {
  return dmaEventSpecs()[static_cast<size_t>(event)];
}

std::vector<std::string> missingFields(const DmaEventSpec& spec, const EventFormat& format) {
  std::vector<std::string> missing;
  for (std::string_view f : {spec.key, spec.value})
    if (!f.empty() && !format.has(f)) missing.emplace_back(f);
  return missing;
}

DmaReading readingFromHists(const std::map<DmaEvent, Hist>& hists) {
  DmaReading r;
  for (const auto& [event, hist] : hists) {
    r.armed.insert(event);
    r.dropped += hist.dropped;
    const DmaEventSpec& spec = specOf(event);
    for (const HistEntry& e : hist.entries) {
      auto value = [&](std::string_view name) {
        auto it = e.values.find(name);
        return it == e.values.end() ? uint64_t{0} : it->second;
      };
      uint64_t hits = value("hitcount");
      uint64_t sum = spec.value.empty() ? 0 : value(spec.value);
      if (!spec.perDevice()) {
        if (event == DmaEvent::IommuMap) {
          r.host.maps += hits;
          r.host.mappedBytes += sum;
        } else {
          r.host.unmaps += hits;
          r.host.unmappedBytes += sum;
        }
        continue;
      }
      DeviceDmaCounters& d = r.devices[e.key];
      switch (event) {
        case DmaEvent::MapPage:
          d.maps += hits;
          d.mappedBytes += sum;
          break;
        case DmaEvent::UnmapPage:
        case DmaEvent::UnmapSg: d.unmaps += hits; break;
        case DmaEvent::MapSg:
          d.maps += hits;
          d.sgMaps += hits;
          d.sgEntries += sum;
          break;
        case DmaEvent::Bounced:
          d.bounces += hits;
          d.bouncedBytes += sum;
          break;
        case DmaEvent::PageFault: d.faults += hits; break;
        case DmaEvent::IommuMap:
        case DmaEvent::IommuUnmap: break;
      }
    }
  }
  return r;
}

bool attributesMaps(const DmaReading& reading) {
  return reading.armed.contains(DmaEvent::MapPage);
}

namespace {

// The increase of a cumulative counter; a counter that went backwards restarted from zero.
uint64_t increase(uint64_t before, uint64_t after, bool& restarted) {
  if (after >= before) return after - before;
  restarted = true;
  return after;
}

DeviceDmaCounters difference(const DeviceDmaCounters& b, const DeviceDmaCounters& a, bool& restarted) {
  return {increase(b.maps, a.maps, restarted),
          increase(b.mappedBytes, a.mappedBytes, restarted),
          increase(b.unmaps, a.unmaps, restarted),
          increase(b.sgMaps, a.sgMaps, restarted),
          increase(b.sgEntries, a.sgEntries, restarted),
          increase(b.bounces, a.bounces, restarted),
          increase(b.bouncedBytes, a.bouncedBytes, restarted),
          increase(b.faults, a.faults, restarted)};
}

double perSecond(uint64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0.0;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

DmaInterval diffReadings(const DmaReading& before, const DmaReading& after, double seconds) {
  DmaInterval iv;
  iv.seconds = seconds;
  iv.mapsAttributed = attributesMaps(after);
  static const DeviceDmaCounters kZero{};
  for (const auto& [name, now] : after.devices) {
    auto it = before.devices.find(name);
    const DeviceDmaCounters& then = it == before.devices.end() ? kZero : it->second;
    DeviceDmaDelta d;
    d.device = name;
    d.delta = difference(then, now, iv.restarted);
    d.mapsPerSecond = perSecond(d.delta.maps, seconds);
    d.unmapsPerSecond = perSecond(d.delta.unmaps, seconds);
    d.mappedMiBPerSecond = perSecond(d.delta.mappedBytes, seconds) / kMiB;
    d.bouncesPerSecond = perSecond(d.delta.bounces, seconds);
    uint64_t pageMaps = d.delta.maps - d.delta.sgMaps;
    if (pageMaps > 0) d.meanMapBytes = static_cast<double>(d.delta.mappedBytes) / static_cast<double>(pageMaps);
    iv.devices.push_back(std::move(d));
  }
  iv.host = {increase(before.host.maps, after.host.maps, iv.restarted),
             increase(before.host.mappedBytes, after.host.mappedBytes, iv.restarted),
             increase(before.host.unmaps, after.host.unmaps, iv.restarted),
             increase(before.host.unmappedBytes, after.host.unmappedBytes, iv.restarted)};
  iv.hostMapsPerSecond = perSecond(iv.host.maps, seconds);
  iv.hostUnmapsPerSecond = perSecond(iv.host.unmaps, seconds);
  iv.dropped = increase(before.dropped, after.dropped, iv.restarted);
  return iv;
}

std::vector<DmaRow> dmaRows(const DmaInterval& interval, const HostFacts& host) {
  std::map<std::string, DmaRow, std::less<>> rows;
  for (const PciDevice& dev : host.devices) {
    DmaRow row;
    row.dma.device = dev.address;
    row.name = dev.displayName();
    row.driver = dev.driver.value_or("");
    row.group = dev.group;
    row.untrusted = dev.untrusted();
    const Group* g = dev.group ? host.group(*dev.group) : nullptr;
    if (!dev.group) {
      row.translated = false;
    } else if (g && g->type) {
      row.domain = g->type;
      row.translated = isTranslated(*g->type);
    }
    rows.emplace(dev.address, std::move(row));
  }
  for (const DeviceDmaDelta& d : interval.devices) {
    auto it = rows.find(d.device);
    if (it == rows.end()) {
      DmaRow row;
      row.name = d.device;
      // A PCI function the host no longer has was unplugged; other devices (platform, virtio)
      // are not in the host's PCI list at all.
      row.present = !isPciAddress(d.device);
      it = rows.emplace(d.device, std::move(row)).first;
    }
    it->second.dma = d;
  }
  std::vector<DmaRow> out;
  out.reserve(rows.size());
  for (auto& [name, row] : rows) out.push_back(std::move(row));
  return out;
}

void sortRows(std::vector<DmaRow>& rows, DmaSortKey key) {
  auto measure = [key](const DmaRow& r) -> double {
    switch (key) {
      case DmaSortKey::Maps: return r.dma.mapsPerSecond;
      case DmaSortKey::MiB: return r.dma.mappedMiBPerSecond;
      case DmaSortKey::MeanSize: return r.dma.meanMapBytes.value_or(0);
      case DmaSortKey::Bounces: return r.dma.bouncesPerSecond;
      case DmaSortKey::Faults: return static_cast<double>(r.dma.delta.faults);
      case DmaSortKey::Device: return 0;
    }
    return 0;
  };
  std::ranges::stable_sort(rows, [&](const DmaRow& a, const DmaRow& b) {
    double ma = measure(a);
    double mb = measure(b);
    if (ma != mb) return ma > mb;
    return a.dma.device < b.dma.device;
  });
}

}  // namespace iommud::core
