#include "app/report/status_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "app/report/json_writer.hpp"
#include "app/report/text_style.hpp"

namespace iommud::app {

using namespace core;  // NOLINT(google-build-using-namespace): presentation of the core model

void writeReasonsJson(JsonWriter& w, const std::vector<Reason>& reasons) {
  w.beginArray();
  for (const auto& r : reasons) w.beginObject().field("source", toString(r.source)).field("text", r.text).endObject();
  w.endArray();
}

namespace {

// "0x" and at least `width` hex digits (fmt's "0x{:0{}x}", without its parsing per call).
std::string hex(uint64_t v, int width = 0) {
  std::array<char, 16> digits{};
  size_t n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v & 0xfU];
    v >>= 4U;
  } while (v != 0);
  std::string out = "0x";
  if (static_cast<size_t>(width) > n) out.append(static_cast<size_t>(width) - n, '0');
  while (n > 0) out += digits[--n];
  return out;
}

void writeUnit(JsonWriter& w, const IommuUnit& u) {
  w.beginObject();
  w.field("name", u.name).field("vendor", toString(u.vendor));
  w.key("version");
  u.version.empty() ? w.null() : w.value(u.version);
  const auto* c = u.intel ? &*u.intel : nullptr;
  const auto* a = u.amd ? &*u.amd : nullptr;
  w.key("cap");
  c != nullptr ? w.value(hex(c->cap)) : a != nullptr ? w.value(hex(a->cap)) : w.null();
  w.key("ecap");
  c != nullptr ? w.value(hex(c->ecap)) : w.null();
  w.key("features");
  a != nullptr ? w.value(a->efr2 ? hex(*a->efr2) + ":" + hex(a->efr) : hex(a->efr)) : w.null();
  w.key("caching_mode");
  c != nullptr ? w.value(c->cachingMode()) : w.null();
  w.key("rwbf");
  c != nullptr ? w.value(c->rwbf()) : w.null();
  w.key("pass_through");
  c != nullptr ? w.value(c->passThrough()) : w.null();
  w.key("np_cache");
  a != nullptr ? w.value(a->npCache()) : w.null();
  if (c != nullptr) {
    w.field("page_selective_invalidation", c->pageSelectiveInvalidation())
        .field("super_pages", c->superPageSizes())
        .field("domains", uint64_t{1} << c->numDomainsLog2())
        .field("snoop_control", c->snoopControl())
        .field("scalable_mode", c->scalableMode())
        .field("first_level_translation", c->firstLevelTranslation())
        .field("second_level_translation", c->secondLevelTranslation());
  }
  if (a != nullptr) w.field("iotlb", a->iotlb()).field("efr_supported", a->efrSupported());
  w.endObject();
}

void writeBlock(JsonWriter& w, const BlockDev& b) {
  w.field("name", b.name).field("dev", b.devNum).field("holders", b.holders);
}

}  // namespace

void writeDeviceJson(JsonWriter& w, const PciDevice& d) {
  w.beginObject();
  w.field("address", d.address)
      .field("vendor_id", hex(d.vendorId, 4))
      .field("device_id", hex(d.deviceId, 4))
      .field("subsystem_vendor_id", hex(d.subsystemVendorId, 4))
      .field("subsystem_device_id", hex(d.subsystemDeviceId, 4))
      .field("class", hex(d.classCode, 6))
      .field("kind", toString(d.kind()))
      .field("driver", d.driver)
      .field("group", d.group);
  w.key("removable");
  d.removable == Removable::Absent ? w.null() : w.value(toString(d.removable));
  w.field("untrusted", d.untrusted()).field("thunderbolt", d.thunderbolt);
  w.key("thunderbolt_reason");
  d.thunderbolt ? w.value(d.thunderboltWhy) : w.null();
  w.field("bridges", d.bridges).field("sriov_numvfs", d.sriovNumVfs);
  w.key("netdevs").beginArray();
  for (const auto& n : d.netdevs) {
    w.beginObject().field("name", n.name).field("ifindex", n.ifindex).field("up", n.up).field("operstate", n.operstate);
    w.key("master");
    n.master.empty() ? w.null() : w.value(n.master);
    w.endObject();
  }
  w.endArray();
  w.key("nvme").beginArray();
  for (const auto& c : d.nvme) {
    w.beginObject().field("name", c.name).field("model", c.model).field("serial", c.serial);
    w.key("namespaces").beginArray();
    for (const auto& ns : c.namespaces) {
      w.beginObject();
      writeBlock(w, ns.disk);
      w.key("partitions").beginArray();
      for (const auto& p : ns.partitions) {
        w.beginObject();
        writeBlock(w, p);
        w.endObject();
      }
      w.endArray().endObject();
    }
    w.endArray().endObject();
  }
  w.endArray();
  w.field("in_use", !d.inUse.empty());
  w.key("in_use_reasons").beginArray();
  for (const auto& r : d.inUse) w.beginObject().field("kind", toString(r.kind)).field("detail", r.detail).endObject();
  w.endArray();
  w.endObject();
}

void writeFindingJson(JsonWriter& w, const Finding& f) {
  w.beginObject()
      .field("id", f.id)
      .field("severity", toString(f.severity))
      .field("title", f.title)
      .field("summary", f.summary)
      .field("groups", f.groups)
      .field("devices", f.devices);
  w.key("remedies").beginArray();
  for (const auto& r : f.remedies) {
    w.beginObject().field("action", r.action).field("security_cost", r.securityCost).endObject();
  }
  w.endArray().endObject();
}

void writeGroupJson(JsonWriter& w, const Group& g, const HostMode& m) {
  w.beginObject().field("id", g.id);
  w.key("type");
  g.type ? w.value(toString(*g.type)) : g.typeText.empty() ? w.null() : w.value(g.typeText);
  w.field("devices", g.devices).field("shared", g.devices.size() > 1);
  auto notes = m.groupNotes.find(g.id);
  w.field("notes", notes != m.groupNotes.end() ? notes->second : std::vector<std::string>{});
  w.endObject();
}

void writeChangeJson(JsonWriter& w, const ChangeRecord& c) {
  w.beginObject()
      .field("kind", std::string(toString(c.kind)))
      .field("device", c.device)
      .field("group", c.group)
      .field("object", c.object)
      .field("key", c.key)
      .field("from", c.original)
      .field("to", c.written)
      .field("rule", c.rule)
      .field("rule_where", c.ruleWhere)
      .field("time", c.time)
      .field("irreversible", c.irreversible)
      .endObject();
}

namespace {

void writeStatusJson(JsonWriter& w, const Status& s) {
  const auto& h = s.host;
  const auto& m = s.mode;
  const auto& k = h.kernel;
  w.beginObject().field("schema_version", kStatusSchemaVersion);

  w.key("kernel").beginObject().field("release", k.release);
  w.key("version");
  k.upstream.version ? w.value(k.upstream.version->str()) : w.null();
  w.field("version_source", toString(k.upstream.source))
      .field("cmdline", k.cmdline)
      .field("iommu_options", k.iommuCmdline.params);
  w.key("config_source");
  k.configSource.empty() ? w.null() : w.value(k.configSource);
  w.key("config").beginObject();
  for (const auto& [sym, val] : k.config) w.field(sym, val);
  w.endObject().endObject();

  w.key("iommu").beginObject().field("present", m.present).field("vendor", toString(m.vendor));
  w.key("default_domain");
  m.passthrough ? w.value(*m.passthrough ? "passthrough" : "translated") : w.null();
  w.field("strict", m.strict).field("mode", m.modeName());
  w.key("reasons");
  writeReasonsJson(w, m.reasons);
  w.key("units").beginArray();
  for (const auto& u : h.units) writeUnit(w, u);
  w.endArray();
  w.field("firmware_tables", h.firmware.tables).field("dmar_platform_opt_in", h.firmware.dmarPlatformOptIn);
  w.endObject();

  w.key("swiotlb")
      .beginObject()
      .field("nslabs", h.swiotlb.nslabs)
      .field("used", h.swiotlb.used)
      .field("used_hiwater", h.swiotlb.usedHiwater)
      .endObject();

  w.key("thunderbolt").beginArray();
  for (const auto& t : h.thunderbolt) {
    w.beginObject()
        .field("name", t.name)
        .field("security", t.security)
        .field("iommu_dma_protection", t.iommuDmaProtection)
        .endObject();
  }
  w.endArray();

  w.key("groups").beginArray();
  for (const auto& g : h.groups) writeGroupJson(w, g, m);
  w.endArray();

  w.key("devices").beginArray();
  for (const auto& d : h.devices) writeDeviceJson(w, d);
  w.endArray();

  auto exposed = exposuresOf(s);
  w.key("exposure").beginObject().field("all_memory", reachAllMemory(h, exposed));
  w.key("devices").beginArray();
  for (const auto& e : exposed) {
    w.beginObject().field("address", e.address).field("level", toString(e.level)).key("reasons");
    writeReasonsJson(w, e.reasons);
    w.endObject();
  }
  w.endArray().endObject();

  auto prot = protections(h, m);
  w.key("protections").beginObject().key("host").beginArray();
  for (const auto& p : prot.host) {
    w.beginObject()
        .field("id", p.id)
        .field("state", toString(p.state))
        .field("text", p.text)
        .field("advice", p.advice)
        .endObject();
  }
  w.endArray().key("shared_groups").beginArray();
  for (const auto& g : prot.shared) {
    w.beginObject()
        .field("group", g.group)
        .field("without_acs", g.withoutAcs)
        .field("unknown", g.unknown)
        .field("text", g.text)
        .endObject();
  }
  w.endArray().key("vfio").beginArray();
  for (const auto& v : prot.vfio) {
    w.beginObject().field("group", v.group).field("viable", v.viable).field("blockers", v.blockers).endObject();
  }
  w.endArray().endObject();

  auto level = score(h, exposed, prot);
  w.key("score").beginObject().field("level", level.level).key("criteria").beginArray();
  for (const auto& c : level.criteria) {
    w.beginObject().field("id", c.id).field("level", c.level).field("met", c.met).field("text", c.text).endObject();
  }
  w.endArray().endObject();

  w.key("findings").beginArray();
  for (const auto& f : s.findings) writeFindingJson(w, f);
  w.endArray();
  w.key("unreadable").beginArray();
  for (const auto& u : h.unreadable) w.beginObject().field("path", u.path).field("reason", u.reason).endObject();
  w.endArray();
  w.key("changes").beginArray();
  for (const auto& c : s.changes) writeChangeJson(w, c);
  w.endArray();
  w.key("daemon");
  if (s.daemon) {
    const auto& d = *s.daemon;
    w.beginObject()
        .field("state", d.state)
        .field("summary", d.summary)
        .field("started_at", d.startedAt)
        .field("last_run_at", d.lastRunAt)
        .field("rules", static_cast<int>(d.rules));
    w.key("recent").beginArray();
    for (const auto& a : d.recent) {
      w.beginObject()
          .field("time", a.time)
          .field("result", a.result)
          .field("device", a.device)
          .field("message", a.message)
          .endObject();
    }
    w.endArray();
    w.endObject();
  } else {
    w.null();
  }
  w.endObject();
}

}  // namespace

std::string statusJson(const Status& status) {
  JsonWriter w;
  writeStatusJson(w, status);
  return w.take("\n");
}

void statusJson(const Status& status, const JsonWriter::Sink& sink) {
  JsonWriter w(sink);
  writeStatusJson(w, status);
  (void)w.take("\n");
}

namespace {

std::string typeLabel(const Group& g, const Style& st) {
  if (!g.type) return st.red(g.typeText.empty() ? "?" : g.typeText);
  auto t = std::string(toString(*g.type));
  if (*g.type == DomainType::Identity) return st.yellow(t);
  if (isTranslated(*g.type)) return st.green(t);
  return t;
}

std::string modeSentence(const HostMode& m) {
  if (!m.present) return "off: DMA is not translated; every device can reach all memory";
  if (!m.defaultType) return "on; the default domain could not be determined";
  switch (*m.defaultType) {
    case DomainType::Identity: return "on, passthrough (identity) by default: trusted devices reach all memory";
    case DomainType::Dma: return "on, translated with strict invalidation (DMA) by default";
    case DomainType::DmaFq: return "on, translated with lazy invalidation (DMA-FQ) by default";
    default: return "on, default domain " + std::string(toString(*m.defaultType));
  }
}

std::string deviceFlags(const PciDevice& d, const Style& st) {
  std::vector<std::string> flags;
  if (d.thunderbolt)
    flags.push_back(st.yellow("thunderbolt"));
  else if (d.untrusted())
    flags.push_back(st.yellow("removable"));
  if (!d.inUse.empty()) flags.push_back(st.cyan("in use"));
  if (d.driver == "vfio-pci") flags.push_back(st.cyan("vfio"));
  std::string out;
  for (const auto& f : flags) out += (out.empty() ? "" : ", ") + f;
  return out.empty() ? "" : " [" + out + "]";
}

}  // namespace

namespace {

void unitLines(const HostFacts& h, const Style& st, Lines& line) {
  for (const auto& u : h.units) {
    std::vector<std::string> caps;
    if (u.intel) {
      const auto& c = *u.intel;
      caps.emplace_back(fmt::format("cap {} ecap {}", hex(c.cap), hex(c.ecap)));
      if (c.cachingMode()) caps.emplace_back(st.yellow("caching-mode"));
      if (c.rwbf()) caps.emplace_back("rwbf");
      caps.emplace_back(c.passThrough() ? "pass-through" : st.yellow("no-pass-through"));
      if (c.scalableMode()) caps.emplace_back("scalable-mode");
      auto sp = c.superPageSizes();
      if (!sp.empty()) caps.emplace_back("superpages " + fmt::format("{}", fmt::join(sp, "/")));
    }
    if (u.amd) {
      caps.emplace_back(fmt::format("cap {}", hex(u.amd->cap)));
      if (u.amd->npCache()) caps.emplace_back(st.yellow("np-cache"));
      if (u.amd->iotlb()) caps.emplace_back("iotlb");
    }
    line(fmt::format("  unit {} {}", st.bold(u.name), fmt::join(caps, ", ")));
  }
}

// Kernel, IOMMU (the mode and its reasons), its units, swiotlb.
void headerLines(const Status& s, const Style& st, Lines& line) {
  const auto& h = s.host;
  const auto& m = s.mode;
  std::string version =
      h.kernel.upstream.version ? fmt::format(" (upstream {})", h.kernel.upstream.version->str()) : std::string();
  line(fmt::format("{}{}{}", label(st, "Kernel"), h.kernel.release, version));
  std::string vendor = m.present ? std::string(displayName(m.vendor)) + ", " : std::string();
  line(fmt::format("{}{}{}", label(st, "IOMMU"), vendor, modeSentence(m)));
  for (const auto& r : m.reasons) {
    line("         " + st.dim(std::string(toString(r.source)) + ":") + " " +
         wrapText(r.text, 9 + toString(r.source).size() + 2, st.proseWidth()));
  }
  unitLines(h, st, line);
  if (h.swiotlb.nslabs) {
    line(fmt::format("{}{} slabs ({} MiB), {} in use, high-water {}", label(st, "swiotlb"), *h.swiotlb.nslabs,
                     *h.swiotlb.nslabs * 2 / 1024, h.swiotlb.used.value_or(0), h.swiotlb.usedHiwater.value_or(0)));
  }
}

// Exposure, the level, the host's protections, Thunderbolt/USB4 controllers.
void protectionLines(const Status& s, const std::vector<DeviceExposure>& exposed, const Protections& prot,
                     const Style& st, Lines& line) {
  const auto& h = s.host;
  auto allMemory = reachAllMemory(h, exposed);
  std::string summary = wrapText(exposureSummary(h, exposed), 9, st.proseWidth());
  line(fmt::format("{}{}", label(st, "Exposure"), allMemory.empty() ? st.green(summary) : st.yellow(summary)));
  auto level = score(h, exposed, prot);
  std::vector<std::string> unmet;
  for (const auto& c : level.criteria) {
    if (c.met != true && c.level == level.level + 1) unmet.push_back(c.id + (c.met ? "" : " (unknown)"));
  }
  line(fmt::format(
      "{}{} of 3 (docs/score.md){}", label(st, "Level"), level.level,
      unmet.empty() ? std::string() : fmt::format("; for {}: {}", level.level + 1, fmt::join(unmet, ", "))));
  for (const auto& p : prot.host) {
    std::string state(toString(p.state));
    state = p.state == Protection::State::On                                                       ? st.green(state)
            : p.state == Protection::State::Unknown || p.state == Protection::State::NotApplicable ? state
                                                                                                   : st.yellow(state);
    // A hanging indent after "  protection ID STATE: ", measured without the colour codes.
    size_t hang = std::string_view("  protection ").size() + p.id.size() + 1 + toString(p.state).size() + 2;
    line(fmt::format("  protection {} {}: {}", p.id, state, wrapText(p.text, hang, st.proseWidth())));
    if (!p.advice.empty()) line("      " + st.dim("what to do: " + wrapText(p.advice, 18, st.proseWidth())));
  }
  for (const auto& t : h.thunderbolt) {
    line(fmt::format("{}{}: security {}, IOMMU DMA protection {}", label(st, "TB/USB4"), t.name, t.security,
                     t.iommuDmaProtection ? (*t.iommuDmaProtection ? "yes" : "no") : "unknown"));
  }
}

// A device's line, what it can reach, what uses it.
void deviceLines(const PciDevice& d, const std::vector<DeviceExposure>& exposed, const Style& st, Lines& line) {
  std::string name = d.displayName() == d.address ? "" : d.displayName();
  line(fmt::format("        {}  {:<10} {:04x}:{:04x} {:<6} {}{}", d.address, name, d.vendorId, d.deviceId,
                   toString(d.kind()), d.driver.value_or("-"), deviceFlags(d, st)));
  if (d.kind() != DeviceKind::Bridge) {
    auto e =
        std::find_if(exposed.begin(), exposed.end(), [&](const DeviceExposure& x) { return x.address == d.address; });
    if (e != exposed.end()) {
      std::string text = "exposure: " + std::string(describe(e->level));
      line("            " + (e->level == Exposure::AllMemory ? st.yellow(text) : st.dim(text)));
    }
  }
  for (const auto& r : d.inUse) line("            " + st.dim("in use: " + r.detail));
}

// One group: its type, the mode's notes, its sharing and VFIO verdicts, its devices.
void groupLines(const Status& s, const Group& g, const std::vector<DeviceExposure>& exposed, const Protections& prot,
                const Style& st, Lines& line) {
  const auto& h = s.host;
  std::string shared = g.devices.size() > 1 ? st.yellow(fmt::format(" shared by {} devices", g.devices.size())) : "";
  line(fmt::format("  {:>4}  {}{}", g.id, typeLabel(g, st), shared));
  if (auto notes = s.mode.groupNotes.find(g.id); notes != s.mode.groupNotes.end()) {
    for (const auto& n : notes->second) line("        " + st.dim(wrapText(n, 8, st.proseWidth())));
  }
  for (const auto& sg : prot.shared) {
    if (sg.group == g.id) line("        " + st.dim("shared: " + wrapText(sg.text, 16, st.proseWidth())));
  }
  const bool vfioUsed = std::any_of(g.devices.begin(), g.devices.end(), [&](const std::string& a) {
    const auto* d = h.device(a);
    return d != nullptr && d->driver == "vfio-pci";
  });
  for (const auto& v : prot.vfio) {
    if (v.group != g.id || !vfioUsed) continue;
    line("        " + st.dim(v.viable ? std::string("VFIO: viable")
                                      : "VFIO: not viable: " + wrapText(fmt::format("{}", fmt::join(v.blockers, "; ")),
                                                                        27, st.proseWidth())));
  }
  for (const auto& a : g.devices) {
    if (const auto* d = h.device(a)) {
      deviceLines(*d, exposed, st, line);
    } else {
      line("        " + a);
    }
  }
}

void deviceSections(const Status& s, const std::vector<DeviceExposure>& exposed, const Protections& prot,
                    const Style& st, Lines& line) {
  const auto& h = s.host;
  if (!h.groups.empty()) {
    line("");
    line(st.bold("Groups"));
    for (const auto& g : h.groups) groupLines(s, g, exposed, prot, st, line);
  }
  std::vector<const PciDevice*> ungrouped;
  for (const auto& d : h.devices) {
    if (!d.group && d.kind() != DeviceKind::Bridge) ungrouped.push_back(&d);
  }
  if (ungrouped.empty()) return;
  line("");
  // Untranslated, but on an SMMU not necessarily reaching anything: each line says (docs/score.md).
  line(st.bold(s.mode.present ? "Devices outside any group" : "Devices (not translated)"));
  for (const auto* d : ungrouped) deviceLines(*d, exposed, st, line);
}

void findingLines(const Status& s, const Style& st, Lines& line) {
  line("");
  if (s.findings.empty()) {
    line(st.bold("Findings") + ": none");
    return;
  }
  line(st.bold("Findings"));
  for (const auto& f : s.findings) {
    auto sev = std::string(toString(f.severity));
    std::string sevText = f.severity == Severity::Info      ? sev
                          : f.severity == Severity::Warning ? st.yellow(sev)
                                                            : st.red(sev);
    line(fmt::format("  {} {} {}", sevText, st.bold(f.id), f.title));
    line("      " + wrapText(f.summary, 6, st.proseWidth()));
    for (const auto& r : f.remedies) {
      line("      - " + wrapText(r.action, 8, st.proseWidth()));
      line("        " + st.dim("cost: ") + wrapText(r.securityCost, 14, st.proseWidth()));
    }
  }
}

// What the daemon says of itself, what iommud changed, what could not be read.
void iommudLines(const Status& s, const Style& st, Lines& line) {
  if (s.daemon) {
    const auto& d = *s.daemon;
    line("");
    line(st.bold("iommud") + " is " + d.state + " (since " + d.startedAt + ", " + std::to_string(d.rules) +
         " rules): " + d.summary);
    if (!d.recent.empty()) {
      constexpr size_t kShown = 10;
      line("  Last actions" + (d.lastRunAt.empty() ? std::string() : " (last run " + d.lastRunAt + ")") + ":");
      for (size_t i = d.recent.size() > kShown ? d.recent.size() - kShown : 0; i < d.recent.size(); ++i) {
        const auto& a = d.recent[i];
        line(fmt::format("  {} {:<8} {}", a.time, a.result, wrapText(a.message, 32, st.proseWidth())));
      }
    }
  }
  if (!s.changes.empty()) {
    line("");
    line(st.bold("Changed by iommud") + " (`iommuctl revert` restores what is still as iommud left it)");
    for (const auto& c : s.changes) {
      line(fmt::format("  {} {}{}", c.time, changeText(c),
                       c.irreversible ? st.yellow(" (irreversible until unbind or reboot)") : ""));
      line("      " + st.dim("by rule " + c.rule + " (" + c.ruleWhere + ")"));
    }
  }
  if (!s.host.unreadable.empty()) {
    line("");
    // Root helps only where permission was what stopped the read (strerror(EACCES)); an
    // unmounted debugfs or a refused FIFO stays unreadable for root too.
    const bool denied = std::any_of(s.host.unreadable.begin(), s.host.unreadable.end(),
                                    [](const Unreadable& u) { return u.reason == "Permission denied"; });
    line(st.bold("Not readable") + (denied ? " (those denied: run as root to see them):" : ":"));
    for (const auto& u : s.host.unreadable) line(fmt::format("  {}: {}", u.path, u.reason));
  }
}

// The device of `all` (those that can reach all memory) a person should worry about first: one an
// attacker can plug in (Thunderbolt/USB4), one outside the machine's case, a NIC (its firmware
// faces the network), one a driver runs, then the first.
const PciDevice* worstOf(const HostFacts& h, const std::vector<std::string>& all) {
  const PciDevice* worst = nullptr;
  auto rank = [](const PciDevice& d) {
    if (d.thunderbolt) return 4;
    if (d.untrusted()) return 3;
    if (d.kind() == DeviceKind::Nic) return 2;
    return d.driver ? 1 : 0;
  };
  for (const auto& a : all) {
    const auto* d = h.device(a);
    if (d != nullptr && (worst == nullptr || rank(*d) > rank(*worst))) worst = d;
  }
  return worst;
}

std::string severityCounts(const std::vector<const Finding*>& findings) {
  std::vector<std::string> parts;
  for (auto sev : {Severity::Error, Severity::Warning, Severity::Info}) {
    auto n = std::count_if(findings.begin(), findings.end(), [&](const Finding* f) { return f->severity == sev; });
    if (n == 0) continue;
    std::string name(toString(sev));
    parts.push_back(fmt::format("{} {}{}", n, name, n > 1 && sev != Severity::Info ? "s" : ""));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Whether iommud runs here and since when, then the last change of its in effect (its records).
void daemonVerdict(const Status& s, const Style& st, Lines& line) {
  if (s.daemon) {
    const auto& d = *s.daemon;
    line(label(st, "iommud") +
         wrapText(fmt::format("{} since {}, {} rules: {}", d.state, d.startedAt, d.rules, d.summary), 9,
                  st.proseWidth()));
  } else {
    line(label(st, "iommud") + (s.daemonAsked ? "not running (nothing answers for it on the system bus)"
                                              : "not asked (a captured or synthetic host)"));
  }
  if (s.changes.empty()) {
    line("         no change of iommud's in effect");
    return;
  }
  const auto& c = s.changes.back();
  line("         " + wrapText("last change " + c.time + ": " +
                                  (c.kind == ChangeKind::ModprobeConf
                                       ? c.object + (c.existed ? " rewritten" : " written")
                                       : c.object + " " + c.key + " " + c.original + " -> " + c.written) +
                                  fmt::format(" (of {} in effect)", s.changes.size()),
                              9, st.proseWidth()));
}

// "3 devices can reach all memory, the worst 0000:05:00.0 (enp5s0) (Thunderbolt/USB4)"
std::string reachText(const HostFacts& h, const std::vector<std::string>& all) {
  if (all.empty()) return "no device can reach all memory";
  std::string reach = fmt::format("{} device{} can reach all memory", all.size(), all.size() == 1 ? "" : "s");
  const auto* worst = worstOf(h, all);
  if (worst == nullptr) return reach;
  const std::string name = worst->displayName();
  reach += fmt::format("{} {}", all.size() == 1 ? ":" : ", the worst", worst->address);
  if (name != worst->address) reach += " (" + name + ")";
  if (worst->untrusted()) reach += worst->thunderbolt ? " (Thunderbolt/USB4)" : " (removable)";
  return reach;
}

// The most severe findings first, at most kShown of them, each with its first remedy.
void topFindingLines(const std::vector<Finding>& findings, const Style& st, Lines& line) {
  std::vector<const Finding*> order;
  order.reserve(findings.size());
  for (const auto& f : findings) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [](const Finding* a, const Finding* b) { return a->severity > b->severity; });
  if (order.empty()) {
    line("         no findings");
    return;
  }
  line("         " + severityCounts(order) + " (each in full under Findings):");
  constexpr size_t kShown = 6;
  for (size_t i = 0; i < order.size() && i < kShown; ++i) {
    const auto& f = *order[i];
    std::string sev(toString(f.severity));
    sev += std::string(sev.size() < 7 ? 7 - sev.size() : 0, ' ');
    sev = f.severity == Severity::Info ? sev : f.severity == Severity::Warning ? st.yellow(sev) : st.red(sev);
    line(fmt::format("  {} {}: {}", sev, st.bold(f.id), wrapText(f.title, 12 + f.id.size(), st.proseWidth())));
    if (!f.remedies.empty())
      line("          " + st.dim("first: ") + wrapText(f.remedies.front().action, 17, st.proseWidth()));
  }
  if (order.size() > kShown) line(fmt::format("  and {} more under Findings", order.size() - kShown));
}

void verdictLines(const Status& s, const std::vector<DeviceExposure>& exposed, const Protections& prot, const Style& st,
                  Lines& line) {
  const auto& h = s.host;
  const auto level = score(h, exposed, prot);
  const auto all = reachAllMemory(h, exposed);
  // Wrapped before it is coloured: the escape codes take no room on the terminal.
  const std::string verdict =
      wrapText(fmt::format("protection level {} of 3; {}", level.level, reachText(h, all)), 9, st.proseWidth());
  line(label(st, "Verdict") + (all.empty() ? st.green(verdict) : st.yellow(verdict)));
  topFindingLines(s.findings, st, line);
  daemonVerdict(s, st, line);
}

// The verdict, then, unless `brief`, everything else.
std::string statusLines(const Status& s, bool color, size_t width, bool brief) {
  Style st{color, width};
  Lines line;
  const auto exposed = exposuresOf(s);
  const auto prot = protections(s.host, s.mode);
  verdictLines(s, exposed, prot, st, line);
  if (!brief) {
    line("");
    headerLines(s, st, line);
    protectionLines(s, exposed, prot, st, line);
    deviceSections(s, exposed, prot, st, line);
    findingLines(s, st, line);
    iommudLines(s, st, line);
  }
  return fitLines(line.out, width);
}

}  // namespace

std::string changeText(const ChangeRecord& c) {
  return (c.kind == ChangeKind::ModprobeConf ? c.object + (c.existed ? " rewritten" : " written")
                                             : c.object + " " + c.key + ": " + c.original + " -> " + c.written) +
         (c.pending ? " (pending: the process making it stopped first; the next apply or start settles it)" : "");
}

std::string statusBrief(const Status& s, bool color, size_t width) {
  return statusLines(s, color, width, true);
}

std::string statusText(const Status& s, bool color, size_t width) {
  return statusLines(s, color, width, false);
}

}  // namespace iommud::app
