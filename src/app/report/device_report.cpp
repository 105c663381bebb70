#include "app/report/device_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "app/report/json_writer.hpp"
#include "app/report/status_report.hpp"
#include "core/spelling.hpp"

namespace iommud::app {

using namespace core;  // NOLINT(google-build-using-namespace): presentation of the core model

DeviceView deviceView(const Status& s, const PciDevice& d, const std::vector<DeviceExposure>& exposures,
                      const std::vector<RuleEvaluation>& evaluations) {
  DeviceView v;
  v.device = &d;
  v.group = d.group ? s.host.group(*d.group) : nullptr;
  auto e =
      std::find_if(exposures.begin(), exposures.end(), [&](const DeviceExposure& x) { return x.address == d.address; });
  if (e != exposures.end()) v.exposure = &*e;
  v.findings = findingsConcerning(s, d);
  for (const auto& r : evaluations) {
    if (r.matches) v.rules.push_back(&r);
  }
  for (const auto& c : s.changes) {
    if (c.device == d.address || (c.group && c.group == d.group)) v.changes.push_back(&c);
  }
  return v;
}

std::vector<std::string> nearestDeviceNames(const HostFacts& host, const std::string& name) {
  std::vector<std::string> names;
  for (const auto& d : host.devices) {
    names.push_back(d.address);
    for (const auto& n : d.netdevs) names.push_back(n.name);
    for (const auto& c : d.nvme) {
      names.push_back(c.name);
      for (const auto& ns : c.namespaces) names.push_back(ns.disk.name);
    }
  }
  // An address without its domain is compared with the addresses without theirs.
  const bool shortAddress = name.size() == 7 && isPciAddress("0000:" + name);
  std::vector<std::string> out;
  size_t least = std::max<size_t>(2, name.size() / 3);  // farther is no longer a likely slip
  for (const auto& n : names) {
    const size_t distance = editDistance(name, shortAddress && isPciAddress(n) ? n.substr(5) : n);
    if (distance < least) out.clear();
    if (distance <= least && std::find(out.begin(), out.end(), n) == out.end()) {
      least = distance;
      out.push_back(n);
    }
  }
  return out;
}

namespace {

std::string deviceName(const HostFacts& h, const std::string& address) {
  const PciDevice* d = h.device(address);
  return d == nullptr || d->displayName() == address ? address : address + " " + d->displayName();
}

std::string trustText(const PciDevice& d) {
  if (d.thunderbolt) return "untrusted: behind a Thunderbolt/USB4 tunnel (" + d.thunderboltWhy + ")";
  if (d.removable == Removable::Removable) return "untrusted: below a removable (external-facing) port";
  if (d.removable == Removable::Fixed) return "trusted: a fixed device";
  return "trusted (the kernel does not say whether its port is removable)";
}

void identityLines(Lines& line, const Style& st, const core::HostFacts& h, const core::PciDevice& d) {
  line(fmt::format("{}{} ({:04x}:{:04x}, class {:06x}, {})", label(st, "Device"), deviceName(h, d.address), d.vendorId,
                   d.deviceId, d.classCode, toString(d.kind())));
  if (!d.nvme.empty() && !d.nvme.front().model.empty()) line("         model " + d.nvme.front().model);
  line(label(st, "Driver") + (d.driver ? *d.driver : std::string("none")) +
       (d.inUse.empty() ? ", not in use" : ", " + st.cyan("in use")));
  for (const auto& r : d.inUse) line("         " + st.dim(wrapText(r.detail, 9, st.proseWidth())));
  const std::string trust = trustText(d);
  line(label(st, "Trust") + (d.untrusted() ? st.yellow(trust) : trust));
}

void groupLines(Lines& line, const Style& st, const core::HostFacts& h, const DeviceView& v) {
  if (v.group == nullptr) {
    line(label(st, "Group") + "none: no IOMMU translates its DMA");
    return;
  }
  std::string type = v.group->typeText.empty() ? "?" : v.group->typeText;
  std::vector<std::string> others;
  for (const auto& a : v.group->devices) {
    if (a != v.device->address) others.push_back(deviceName(h, a));
  }
  line(fmt::format("{}{} ({}), {}", label(st, "Group"), v.group->id, type,
                   others.empty() ? std::string("no other device")
                                  : st.yellow(fmt::format("shared with {} other device{}", others.size(),
                                                          others.size() == 1 ? "" : "s"))));
  for (const auto& o : others) line("         " + o);
}

void exposureLines(Lines& line, const Style& st, const DeviceView& v) {
  if (v.exposure == nullptr) return;
  std::string level(describe(v.exposure->level));
  line(label(st, "Exposure") + (v.exposure->level == Exposure::AllMemory ? st.yellow(level) : level));
  for (const auto& r : v.exposure->reasons) {
    line("         " + st.dim(std::string(toString(r.source)) + ":") + " " +
         wrapText(r.text, 11 + toString(r.source).size(), st.proseWidth()));
  }
}

void findingLines(Lines& line, const Style& st, const DeviceView& v) {
  line(st.bold("Findings") + (v.findings.empty() ? ": none" : ""));
  for (const auto* f : v.findings) {
    auto sev = std::string(toString(f->severity));
    line(fmt::format("  {} {} {}",
                     f->severity == Severity::Info      ? sev
                     : f->severity == Severity::Warning ? st.yellow(sev)
                                                        : st.red(sev),
                     st.bold(f->id), f->title));
    line("      " + wrapText(f->summary, 6, st.proseWidth()));
    if (!f->remedies.empty())
      line("      " + st.dim("first: ") + wrapText(f->remedies.front().action, 13, st.proseWidth()));
  }
}

void ruleLines(Lines& line, const Style& st, const DeviceView& v, bool rulesKnown) {
  if (!rulesKnown) {
    line(st.bold("Rules") + ": not known, the policies are not valid (`iommuctl check`)");
    return;
  }
  line(st.bold("Rules") + (v.rules.empty() ? ": none matches (`iommuctl explain` shows the near ones)" : ""));
  for (const auto* r : v.rules) {
    line(fmt::format("  {} ({}), mode {}", st.bold(r->rule->name), r->rule->where.str(), toString(r->rule->mode)));
  }
}

void changeLines(Lines& line, const Style& st, const DeviceView& v) {
  line(st.bold("Changed by iommud") + (v.changes.empty() ? ": nothing" : ""));
  for (const auto* c : v.changes) {
    line(fmt::format("  {} {}{}", c->time, changeText(*c),
                     c->irreversible ? st.yellow(" (irreversible until unbind or reboot)") : ""));
    line("      " + st.dim("by rule " + c->rule + " (" + c->ruleWhere + ")"));
  }
}

}  // namespace

std::string deviceText(const Status& s, const DeviceView& v, bool rulesKnown, bool color, size_t width) {
  const Style st{color, width};
  Lines line;
  identityLines(line, st, s.host, *v.device);
  groupLines(line, st, s.host, v);
  exposureLines(line, st, v);
  line("");
  findingLines(line, st, v);
  line("");
  ruleLines(line, st, v, rulesKnown);
  line("");
  changeLines(line, st, v);
  return fitLines(line.out, width);
}

std::string deviceJson(const Status& s, const DeviceView& v, bool rulesKnown) {
  JsonWriter w;
  w.beginObject().field("schema_version", kStatusSchemaVersion);
  w.key("device");
  writeDeviceJson(w, *v.device);
  w.key("group");
  if (v.group != nullptr) {
    writeGroupJson(w, *v.group, s.mode);
  } else {
    w.null();
  }
  w.key("exposure");
  if (v.exposure != nullptr) {
    w.beginObject().field("level", toString(v.exposure->level)).key("reasons");
    writeReasonsJson(w, v.exposure->reasons);
    w.endObject();
  } else {
    w.null();
  }
  w.key("findings").beginArray();
  for (const auto* f : v.findings) writeFindingJson(w, *f);
  w.endArray();
  w.key("rules");
  if (rulesKnown) {
    w.beginArray();
    for (const auto* r : v.rules) {
      w.beginObject()
          .field("name", r->rule->name)
          .field("file", r->rule->where.file)
          .field("line", r->rule->where.line)
          .field("mode", toString(r->rule->mode))
          .endObject();
    }
    w.endArray();
  } else {
    w.null();
  }
  w.key("changes").beginArray();
  for (const auto* c : v.changes) writeChangeJson(w, *c);
  w.endArray();
  w.endObject();
  return w.take("\n");
}

}  // namespace iommud::app
