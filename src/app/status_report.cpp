#include "app/status_report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace iommud::app {

using json = nlohmann::ordered_json;
using namespace core;  // NOLINT(google-build-using-namespace): presentation of the core model

Status buildStatus(HostFacts host) {
  Status s;
  s.mode = deriveMode(host);
  s.findings = findings(host, s.mode);
  s.host = std::move(host);
  return s;
}

namespace {

std::string hex(uint64_t v, int width = 0) {
  return fmt::format("0x{:0{}x}", v, width);
}

template <class T>
json orNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json unitJson(const IommuUnit& u) {
  json j{{"name", u.name},
         {"vendor", toString(u.vendor)},
         {"version", u.version.empty() ? json(nullptr) : json(u.version)},
         {"cap", nullptr},
         {"ecap", nullptr},
         {"features", nullptr},
         {"caching_mode", nullptr},
         {"rwbf", nullptr},
         {"pass_through", nullptr},
         {"np_cache", nullptr}};
  if (u.intel) {
    const auto& c = *u.intel;
    j["cap"] = hex(c.cap);
    j["ecap"] = hex(c.ecap);
    j["caching_mode"] = c.cachingMode();
    j["rwbf"] = c.rwbf();
    j["pass_through"] = c.passThrough();
    j["page_selective_invalidation"] = c.pageSelectiveInvalidation();
    j["super_pages"] = c.superPageSizes();
    j["domains"] = uint64_t{1} << c.numDomainsLog2();
    j["snoop_control"] = c.snoopControl();
    j["scalable_mode"] = c.scalableMode();
    j["first_level_translation"] = c.firstLevelTranslation();
    j["second_level_translation"] = c.secondLevelTranslation();
  }
  if (u.amd) {
    const auto& a = *u.amd;
    j["cap"] = hex(a.cap);
    j["features"] = a.efr2 ? hex(*a.efr2) + ":" + hex(a.efr) : hex(a.efr);
    j["np_cache"] = a.npCache();
    j["iotlb"] = a.iotlb();
    j["efr_supported"] = a.efrSupported();
  }
  return j;
}

json blockJson(const BlockDev& b) {
  return json{{"name", b.name}, {"dev", b.devNum}, {"holders", b.holders}};
}

json deviceJson(const PciDevice& d) {
  json netdevs = json::array();
  for (const auto& n : d.netdevs) {
    netdevs.push_back({{"name", n.name},
                       {"ifindex", n.ifindex},
                       {"up", n.up},
                       {"operstate", n.operstate},
                       {"master", n.master.empty() ? json(nullptr) : json(n.master)}});
  }
  json nvme = json::array();
  for (const auto& c : d.nvme) {
    json namespaces = json::array();
    for (const auto& ns : c.namespaces) {
      json parts = json::array();
      for (const auto& p : ns.partitions) parts.push_back(blockJson(p));
      json nsj = blockJson(ns.disk);
      nsj["partitions"] = std::move(parts);
      namespaces.push_back(std::move(nsj));
    }
    nvme.push_back({{"name", c.name}, {"model", c.model}, {"serial", c.serial}, {"namespaces", std::move(namespaces)}});
  }
  json reasons = json::array();
  for (const auto& r : d.inUse) reasons.push_back({{"kind", toString(r.kind)}, {"detail", r.detail}});
  // ordered_json keeps members in a vector of pair<const string, json>, which copies (not moves)
  // every member when it grows: reserve, and move the arrays in (bench/run-status measures it).
  json j = json::object();
  j.get_ref<json::object_t&>().reserve(19);
  j["address"] = d.address;
  j["vendor_id"] = hex(d.vendorId, 4);
  j["device_id"] = hex(d.deviceId, 4);
  j["subsystem_vendor_id"] = hex(d.subsystemVendorId, 4);
  j["subsystem_device_id"] = hex(d.subsystemDeviceId, 4);
  j["class"] = hex(d.classCode, 6);
  j["kind"] = toString(d.kind());
  j["driver"] = orNull(d.driver);
  j["group"] = orNull(d.group);
  j["removable"] = d.removable == Removable::Absent ? json(nullptr) : json(toString(d.removable));
  j["untrusted"] = d.untrusted();
  j["thunderbolt"] = d.thunderbolt;
  j["thunderbolt_reason"] = d.thunderbolt ? json(d.thunderboltWhy) : json(nullptr);
  j["bridges"] = d.bridges;
  j["sriov_numvfs"] = d.sriovNumVfs;
  j["netdevs"] = std::move(netdevs);
  j["nvme"] = std::move(nvme);
  j["in_use"] = !d.inUse.empty();
  j["in_use_reasons"] = std::move(reasons);
  return j;
}

json findingJson(const Finding& f) {
  json remedies = json::array();
  for (const auto& r : f.remedies) remedies.push_back({{"action", r.action}, {"security_cost", r.securityCost}});
  return json{{"id", f.id},
              {"severity", toString(f.severity)},
              {"title", f.title},
              {"summary", f.summary},
              {"groups", f.groups},
              {"devices", f.devices},
              {"remedies", std::move(remedies)}};
}

}  // namespace

json statusJson(const Status& s) {
  const auto& h = s.host;
  const auto& m = s.mode;
  json units = json::array();
  for (const auto& u : h.units) units.push_back(unitJson(u));
  json reasons = json::array();
  for (const auto& r : m.reasons) reasons.push_back({{"source", toString(r.source)}, {"text", r.text}});
  json groups = json::array();
  for (const auto& g : h.groups) {
    auto notes = m.groupNotes.find(g.id);
    groups.push_back(
        {{"id", g.id},
         {"type", g.type ? json(toString(*g.type)) : json(g.typeText.empty() ? json(nullptr) : json(g.typeText))},
         {"devices", g.devices},
         {"shared", g.devices.size() > 1},
         {"notes", notes != m.groupNotes.end() ? json(notes->second) : json::array()}});
  }
  json devices = json::array();
  for (const auto& d : h.devices) devices.push_back(deviceJson(d));
  json tb = json::array();
  for (const auto& t : h.thunderbolt) {
    tb.push_back({{"name", t.name}, {"security", t.security}, {"iommu_dma_protection", orNull(t.iommuDmaProtection)}});
  }
  json found = json::array();
  for (const auto& f : s.findings) found.push_back(findingJson(f));
  json unreadable = json::array();
  for (const auto& u : h.unreadable) unreadable.push_back({{"path", u.path}, {"reason", u.reason}});

  const auto& k = h.kernel;
  json top{
      {"schema_version", kStatusSchemaVersion},
      {"kernel",
       {{"release", k.release},
        {"version", k.upstream.version ? json(k.upstream.version->str()) : json(nullptr)},
        {"version_source", toString(k.upstream.source)},
        {"cmdline", k.cmdline},
        {"iommu_options", k.iommuCmdline.params},
        {"config_source", k.configSource.empty() ? json(nullptr) : json(k.configSource)},
        {"config", k.config}}},
      {"iommu",
       {{"present", m.present},
        {"vendor", toString(m.vendor)},
        {"default_domain", m.passthrough ? json(*m.passthrough ? "passthrough" : "translated") : json(nullptr)},
        {"strict", orNull(m.strict)},
        {"mode", m.modeName()},
        {"reasons", std::move(reasons)},
        {"units", std::move(units)},
        {"firmware_tables", h.firmware.tables},
        {"dmar_platform_opt_in", orNull(h.firmware.dmarPlatformOptIn)}}},
      {"swiotlb",
       {{"nslabs", orNull(h.swiotlb.nslabs)},
        {"used", orNull(h.swiotlb.used)},
        {"used_hiwater", orNull(h.swiotlb.usedHiwater)}}},
      {"thunderbolt", std::move(tb)},
  };
  // The large arrays go in last, into reserved space, so they are never copied (see deviceJson).
  auto& obj = top.get_ref<json::object_t&>();
  obj.reserve(obj.size() + 4);
  top["groups"] = std::move(groups);
  top["devices"] = std::move(devices);
  top["findings"] = std::move(found);
  top["unreadable"] = std::move(unreadable);
  return top;
}

namespace {

struct Style {
  bool on;
  [[nodiscard]] std::string wrap(std::string_view code, std::string_view text) const {
    return on ? fmt::format("\033[{}m{}\033[0m", code, text) : std::string(text);
  }
  [[nodiscard]] std::string bold(std::string_view t) const { return wrap("1", t); }
  [[nodiscard]] std::string dim(std::string_view t) const { return wrap("2", t); }
  [[nodiscard]] std::string red(std::string_view t) const { return wrap("31", t); }
  [[nodiscard]] std::string yellow(std::string_view t) const { return wrap("33", t); }
  [[nodiscard]] std::string green(std::string_view t) const { return wrap("32", t); }
  [[nodiscard]] std::string cyan(std::string_view t) const { return wrap("36", t); }
};

// Wraps text to `width` columns, every line after the first indented by `indent`.
std::string wrapText(std::string_view text, size_t indent, size_t width = 100) {
  std::string out;
  size_t col = indent;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string_view::npos) j = text.size();
    auto word = text.substr(i, j - i);
    if (col > indent && col + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
    } else if (col > indent) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    i = j + 1;
  }
  return out;
}

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

std::string statusText(const Status& s, bool color) {
  Style st{color};
  const auto& h = s.host;
  const auto& m = s.mode;
  std::string out;
  auto line = [&](const std::string& l) { out += l + "\n"; };

  std::string version =
      h.kernel.upstream.version ? fmt::format(" (upstream {})", h.kernel.upstream.version->str()) : std::string();
  line(fmt::format("{:<9}{}{}", st.bold("Kernel"), h.kernel.release, version));
  std::string vendor = m.present ? std::string(displayName(m.vendor)) + ", " : std::string();
  line(fmt::format("{:<9}{}{}", st.bold("IOMMU"), vendor, modeSentence(m)));
  for (const auto& r : m.reasons) {
    line("         " + st.dim(std::string(toString(r.source)) + ":") + " " +
         wrapText(r.text, 9 + toString(r.source).size() + 2));
  }
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
  if (h.swiotlb.nslabs) {
    line(fmt::format("{:<9}{} slabs ({} MiB), {} in use, high-water {}", st.bold("swiotlb"), *h.swiotlb.nslabs,
                     *h.swiotlb.nslabs * 2 / 1024, h.swiotlb.used.value_or(0), h.swiotlb.usedHiwater.value_or(0)));
  }
  for (const auto& t : h.thunderbolt) {
    line(fmt::format("{:<9}{}: security {}, IOMMU DMA protection {}", st.bold("TB/USB4"), t.name, t.security,
                     t.iommuDmaProtection ? (*t.iommuDmaProtection ? "yes" : "no") : "unknown"));
  }

  if (!h.groups.empty()) {
    line("");
    line(st.bold("Groups"));
    for (const auto& g : h.groups) {
      std::string shared =
          g.devices.size() > 1 ? st.yellow(fmt::format(" shared by {} devices", g.devices.size())) : "";
      line(fmt::format("  {:>4}  {}{}", g.id, typeLabel(g, st), shared));
      if (auto notes = m.groupNotes.find(g.id); notes != m.groupNotes.end()) {
        for (const auto& n : notes->second) line("        " + st.dim(wrapText(n, 8)));
      }
      for (const auto& a : g.devices) {
        const auto* d = h.device(a);
        if (d == nullptr) {
          line("        " + a);
          continue;
        }
        std::string name = d->displayName() == d->address ? "" : d->displayName();
        line(fmt::format("        {}  {:<10} {:04x}:{:04x} {:<6} {}{}", d->address, name, d->vendorId, d->deviceId,
                         toString(d->kind()), d->driver.value_or("-"), deviceFlags(*d, st)));
        for (const auto& r : d->inUse) line("            " + st.dim("in use: " + r.detail));
      }
    }
  }
  std::vector<const PciDevice*> ungrouped;
  for (const auto& d : h.devices) {
    if (!d.group && d.kind() != DeviceKind::Bridge) ungrouped.push_back(&d);
  }
  if (!ungrouped.empty()) {
    line("");
    line(st.bold(m.present ? "Devices outside any group (not translated)" : "Devices (not translated)"));
    for (const auto* d : ungrouped) {
      std::string name = d->displayName() == d->address ? "" : d->displayName();
      line(fmt::format("        {}  {:<10} {:04x}:{:04x} {:<6} {}{}", d->address, name, d->vendorId, d->deviceId,
                       toString(d->kind()), d->driver.value_or("-"), deviceFlags(*d, st)));
      for (const auto& r : d->inUse) line("            " + st.dim("in use: " + r.detail));
    }
  }

  line("");
  if (s.findings.empty()) {
    line(st.bold("Findings") + ": none");
  } else {
    line(st.bold("Findings"));
    for (const auto& f : s.findings) {
      auto sev = std::string(toString(f.severity));
      std::string sevText = f.severity == Severity::Info      ? sev
                            : f.severity == Severity::Warning ? st.yellow(sev)
                                                              : st.red(sev);
      line(fmt::format("  {} {} {}", sevText, st.bold(f.id), f.title));
      line("      " + wrapText(f.summary, 6));
      for (const auto& r : f.remedies) {
        line("      - " + wrapText(r.action, 8));
        line("        " + st.dim("cost: ") + wrapText(r.securityCost, 14));
      }
    }
  }
  if (!h.unreadable.empty()) {
    line("");
    line(st.bold("Not readable") + " (run as root to see these):");
    for (const auto& u : h.unreadable) line(fmt::format("  {}: {}", u.path, u.reason));
  }
  return out;
}

}  // namespace iommud::app
