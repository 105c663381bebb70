#include "app/report/plan_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <set>

#include "app/report/json_writer.hpp"
#include "app/report/text_style.hpp"

namespace iommud::app {

using namespace core;  // NOLINT(google-build-using-namespace): presentation of the core model

std::string checkText(const config::Loaded& loaded) {
  std::string out;
  size_t warnings = 0;
  for (const auto& d : loaded.diagnostics) {
    out += d.str() + "\n";
    if (d.severity == config::Diagnostic::Severity::Warning) ++warnings;
  }
  size_t files = 0;
  for (const auto& f : loaded.policies.files) {
    if (f.masked) {
      out += f.name + ": masked by " + f.path + "\n";
      continue;
    }
    ++files;
    for (const auto& s : f.shadowed) out += s + ": replaced by " + f.path + "\n";
  }
  if (loaded.ok()) {
    out += fmt::format("{} {}, {} {}: valid", files, files == 1 ? "file" : "files", loaded.policies.rules.size(),
                       loaded.policies.rules.size() == 1 ? "rule" : "rules");
    if (warnings != 0) out += fmt::format(" ({} {})", warnings, warnings == 1 ? "warning" : "warnings");
    out += "\n";
  } else {
    out += fmt::format("{} {}, {} {}: the policies are not valid; iommud keeps the last good set\n", loaded.errors(),
                       loaded.errors() == 1 ? "error" : "errors", warnings, warnings == 1 ? "warning" : "warnings");
  }
  return out;
}

namespace {

std::string riskLabel(Risk r, const Style& st) {
  switch (r) {
    case Risk::High: return st.red("risk high");
    case Risk::Medium: return st.yellow("risk medium");
    case Risk::Low: return st.yellow("risk low");
    case Risk::None: break;
  }
  return st.dim("no risk");
}

std::string deviceLabel(const HostFacts& h, const std::string& address) {
  const PciDevice* d = h.device(address);
  if (d == nullptr || d->displayName() == address) return address;
  return address + " " + d->displayName();
}

std::string settingName(ChangeKind kind, const std::string& object, const std::string& key) {
  switch (kind) {
    case ChangeKind::Domain: return object + " type";
    case ChangeKind::Rings:
    case ChangeKind::Channels:
    case ChangeKind::Coalesce: return fmt::format("{} {} {}", object, toString(kind), key);
    case ChangeKind::ModuleParam: return "parameter " + object;
    case ChangeKind::ModprobeConf: break;
  }
  return object + " " + key;
}

void writeRule(JsonWriter& w, const RuleRef& r) {
  w.key("rule").beginObject().field("name", r.name).field("file", r.where.file).field("line", r.where.line);
  w.field("column", r.where.column).endObject();
}

void writeChange(JsonWriter& w, const Change& c) {
  w.beginObject()
      .field("kind", toString(c.kind))
      .field("device", c.device)
      .field("devices", c.devices)
      .field("group", c.group)
      .field("object", c.object)
      .field("key", c.key)
      .field("from", c.from)
      .field("to", c.to)
      .field("mode", toString(c.mode))
      .field("risk", toString(c.risk))
      .field("trade_off", c.tradeOff)
      .field("disruptive", c.disruptive)
      .field("irreversible", c.irreversible);
  w.key("note");
  c.note.empty() ? w.null() : w.value(c.note);
  w.key("initramfs");
  if (c.initramfs) {
    w.beginObject().field("image", c.initramfs->image).field("rebuild", c.initramfs->command);
    w.key("holds_module");
    c.initramfs->checked ? w.value(true) : w.null();
    w.endObject();
  } else {
    w.null();
  }
  writeRule(w, c.rule);
  w.endObject();
}

void writeSkip(JsonWriter& w, const Skip& s) {
  w.beginObject()
      .field("kind", toString(s.kind))
      .field("device", s.device)
      .field("object", s.object)
      .field("key", s.key)
      .field("wanted", s.wanted)
      .field("reason", toString(s.reason))
      .field("message", s.message);
  writeRule(w, s.rule);
  w.endObject();
}

void writeSatisfied(JsonWriter& w, const Satisfied& s) {
  w.beginObject()
      .field("kind", toString(s.kind))
      .field("device", s.device)
      .field("object", s.object)
      .field("key", s.key)
      .field("value", s.value);
  writeRule(w, s.rule);
  w.endObject();
}

void writePlanBody(JsonWriter& w, const Plan& plan) {
  w.field("trigger", toString(plan.trigger));
  w.key("changes").beginArray();
  for (const auto& c : plan.changes) writeChange(w, c);
  w.endArray();
  w.key("skips").beginArray();
  for (const auto& s : plan.skips) writeSkip(w, s);
  w.endArray();
  w.key("satisfied").beginArray();
  for (const auto& s : plan.satisfied) writeSatisfied(w, s);
  w.endArray();
}

// The changes and skips of a plan, grouped by device, as `plan` and `explain` print them.
void planLines(std::string& out, const Plan& plan, const HostFacts& h, const Style& st, bool showOverridden) {
  auto line = [&](const std::string& l) { out += l + "\n"; };
  std::string current;
  for (const auto& c : plan.changes) {
    if (c.device != current) {
      current = c.device;
      line("  " + st.bold(deviceLabel(h, c.device)));
    }
    std::string verb = c.mode == RuleMode::Apply ? st.green("apply ") : st.cyan("advise");
    line(fmt::format("    {} {}: {} -> {}  [{}]", verb, settingName(c.kind, c.object, c.key), c.from, c.to,
                     riskLabel(c.risk, st)));
    line("           " + st.dim(fmt::format("rule {} ({})", c.rule.name, c.rule.where.str())));
    if (c.risk != Risk::None || c.kind == ChangeKind::Domain)
      line("           " + wrapText(c.tradeOff, 11, st.proseWidth()));
    if (c.irreversible) line("           " + st.yellow("irreversible until unbind or reboot"));
    if (!c.note.empty()) line("           " + st.dim(wrapText(c.note, 11, st.proseWidth())));
  }
  std::vector<const Skip*> skips;
  for (const auto& s : plan.skips) {
    if (showOverridden || s.reason != SkipReason::Overridden) skips.push_back(&s);
  }
  // A section of items grouped under their device, as the changes are.
  auto section = [&](const char* title, const auto& items, auto&& item) {
    if (items.empty()) return;
    line("");
    line(st.bold(title));
    std::string device;
    for (const auto* i : items) {
      if (i->device != device) {
        device = i->device;
        line("  " + st.bold(deviceLabel(h, device)));
      }
      item(*i);
      line("           " + st.dim(fmt::format("rule {} ({})", i->rule.name, i->rule.where.str())));
    }
  };
  section("Not done", skips, [&](const Skip& s) {
    line(fmt::format("    skip   {}: {} ({})", settingName(s.kind, s.object, s.key), s.wanted,
                     st.yellow(std::string(toString(s.reason)))));
    line("           " + wrapText(s.message, 11, st.proseWidth()));
  });
  std::vector<const Satisfied*> satisfied;
  for (const auto& s : plan.satisfied) satisfied.push_back(&s);
  section("Already as wanted", satisfied, [&](const Satisfied& s) {
    line(fmt::format("    keep   {}: {}", settingName(s.kind, s.object, s.key), s.value));
  });
}

}  // namespace

std::string planJson(const Plan& plan, const PolicySet& policies) {
  JsonWriter w;
  w.beginObject().field("schema_version", kPlanSchemaVersion);
  w.key("policies").beginArray();
  for (const auto& f : policies.files) {
    w.beginObject().field("name", f.name).field("masked", f.masked);
    w.key("path");
    f.path.empty() ? w.null() : w.value(f.path);
    w.field("shadowed", f.shadowed).endObject();
  }
  w.endArray();
  w.field("rules", static_cast<int64_t>(policies.rules.size()));
  writePlanBody(w, plan);
  w.endObject();
  return w.take();
}

namespace {
std::string_view triggerText(Trigger t) {
  switch (t) {
    case Trigger::Coldplug: return "at start: disruptive changes wait for boot or hotplug";
    case Trigger::Hotplug: return "as if every device had just appeared";
    case Trigger::Boot: break;
  }
  return "at boot, as iommud --early in the initramfs: only rules with when = \"boot\"";
}
}  // namespace

namespace {
std::string unfittedPlanText(const Plan& plan, const Status& status, const PolicySet& policies, const Style& st) {
  std::string out;
  size_t files =
      std::count_if(policies.files.begin(), policies.files.end(), [](const PolicyFile& f) { return !f.masked; });
  out += fmt::format("{} ({}; {} {}, {} {})\n", st.bold("Plan"), triggerText(plan.trigger), files,
                     files == 1 ? "policy file" : "policy files", policies.rules.size(),
                     policies.rules.size() == 1 ? "rule" : "rules");
  const auto shipped = config::shippedPolicyDir();
  if (shipped != config::installedPolicyDir() &&
      std::any_of(policies.files.begin(), policies.files.end(),
                  [&](const PolicyFile& f) { return f.path.starts_with(shipped + "/"); })) {
    out += fmt::format("  shipped policies from {} (this program runs uninstalled, from its build tree)\n", shipped);
  }
  if (policies.rules.empty()) {
    out += fmt::format("  no rules: nothing to plan (policies live in {})\n",
                       fmt::join(config::defaultPolicyDirs(), ", "));
    return out;
  }
  planLines(out, plan, status.host, st, false);
  size_t apply = std::count_if(plan.changes.begin(), plan.changes.end(),
                               [](const Change& c) { return c.mode == RuleMode::Apply; });
  out += "\n";
  if (plan.changes.empty()) {
    out += fmt::format("Nothing to change; {} {} already as the policies want.\n", plan.satisfied.size(),
                       plan.satisfied.size() == 1 ? "setting is" : "settings are");
  } else {
    out +=
        fmt::format("{} to apply, {} advised, {} not done, {} already as wanted.\n", apply, plan.changes.size() - apply,
                    std::count_if(plan.skips.begin(), plan.skips.end(),
                                  [](const Skip& s) { return s.reason != SkipReason::Overridden; }),
                    plan.satisfied.size());
  }
  return out;
}
}  // namespace

std::string planText(const Plan& plan, const Status& status, const PolicySet& policies, bool color, size_t width) {
  return fitLines(unfittedPlanText(plan, status, policies, Style{color, width}), width);
}

namespace {

// How a change would be made, in words.
std::string takenHow(const Rehearsed& r) {
  switch (r.kind) {
    case ChangeKind::Domain: {
      if (r.live) return "live, with the drivers bound: irreversible until unbind or reboot";
      if (r.unbind.empty()) return "written with the drivers bound: none holds DMA ownership of the group";
      std::vector<std::string> steps;
      for (const auto& m : r.unbind) steps.push_back(fmt::format("{} from {}", m.driver.value_or("?"), m.address));
      return fmt::format("after unbinding {}; rebound after the write", fmt::join(steps, ", "));
    }
    case ChangeKind::Rings:
    case ChangeKind::Channels:
    case ChangeKind::Coalesce:
      if (r.assumed) {
        return "set through ethtool netlink; no current value was read (a snapshot holds no ethtool values), so "
               "the write is assumed to be taken";
      }
      return "set through ethtool netlink";
    case ChangeKind::ModuleParam: return "written to the module's parameter in /sys/module";
    case ChangeKind::ModprobeConf: return "a line of " + r.object + ", read when the module loads next";
  }
  return {};
}

// Who would refuse a change: the kernel's write (its check and errno), or one of iommud's rules.
std::string refusedBy(const Rehearsed& r) {
  if (r.kernel && !r.kernel->taken()) return "the kernel would refuse the write: " + describeCheck(*r.kernel);
  if (!r.safety) return "the kernel or the driver would not take it";
  switch (*r.safety) {
    case DomainRefusal::Untrusted:
    case DomainRefusal::InUse:
    case DomainRefusal::NeverUnbind: return "iommud refuses it, a safety rule; the kernel would take the write";
    case DomainRefusal::NoDefaultDomain:
    case DomainRefusal::NoPassThrough:
    case DomainRefusal::KernelRule:
    case DomainRefusal::DeviceForbids: break;
  }
  return "refused before the write";
}

std::string unfittedRehearsalText(const Rehearsal& rehearsal, const Status& s, const Style& st) {
  std::string out;
  auto line = [&](const std::string& l) { out += l + "\n"; };
  const auto& version = s.host.kernel.upstream.version;
  line(fmt::format("{} (the rules of Linux {}; nothing is written, no lock is taken)", st.bold("Rehearsal"),
                   version ? version->str() : "unknown, judged by the newest"));
  auto section = [&](Rehearsed::Verdict verdict, const std::string& title) {
    if (rehearsal.count(verdict) == 0) return;
    line("");
    line(st.bold(title));
    std::string device;  // each device once, above its items, as plan prints them
    for (const auto& r : rehearsal.items) {
      if (r.verdict != verdict) continue;
      if (r.device != device) {
        device = r.device;
        line("  " + st.bold(deviceLabel(s.host, device)));
      }
      const std::string value = r.from.empty() ? r.to : r.from + " -> " + r.to;
      line(fmt::format("    {}: {}", settingName(r.kind, r.object, r.key), value));
      switch (verdict) {
        case Rehearsed::Verdict::Taken: line("      " + wrapText(takenHow(r), 6, st.proseWidth())); break;
        case Rehearsed::Verdict::Refused:
          line("      " + st.red(wrapText(refusedBy(r), 6, st.proseWidth())));
          line("      " + wrapText(r.why, 6, st.proseWidth()));
          break;
        case Rehearsed::Verdict::Advised: line("      " + wrapText(r.tradeOff, 6, st.proseWidth())); break;
      }
      line("      " + st.dim(fmt::format("rule {} ({})", r.rule.name, r.rule.where.str())));
    }
  };
  section(Rehearsed::Verdict::Taken, "Would be done");
  section(Rehearsed::Verdict::Refused, "Would be refused");
  section(Rehearsed::Verdict::Advised, "Left to advise");
  line("");
  line(fmt::format("{} would be done, {} refused, {} left to advise; nothing was written.",
                   rehearsal.count(Rehearsed::Verdict::Taken), rehearsal.count(Rehearsed::Verdict::Refused),
                   rehearsal.count(Rehearsed::Verdict::Advised)));
  return out;
}

}  // namespace

std::string rehearsalText(const Rehearsal& rehearsal, const Status& status, bool color, size_t width) {
  return fitLines(unfittedRehearsalText(rehearsal, status, Style{color, width}), width);
}

namespace {

size_t failedConditions(const RuleEvaluation& e) {
  return static_cast<size_t>(
      std::count_if(e.conditions.begin(), e.conditions.end(), [](const ConditionResult& c) { return !c.holds; }));
}

// A rule one condition away from matching, when that condition is one a person could change: not
// what the device is (its kind, class, whether it is untrusted) nor what IOMMU hardware the host has (a vIOMMU rule on
// bare metal, an SMMU rule on VT-d; on a host without an IOMMU, no host condition is near).
bool nearly(const RuleEvaluation& e, const HostMode& mode) {
  if (e.matches || failedConditions(e) != 1) return false;
  auto it = std::find_if(e.conditions.begin(), e.conditions.end(), [](const ConditionResult& c) { return !c.holds; });
  if (!mode.present && it->condition.starts_with("host.")) return false;
  static constexpr std::array<std::string_view, 7> kFixed = {
      "kind ", "class ", "untrusted ", "host.iommu ", "host.caching-mode ", "host.np-cache ", "host.rwbf "};
  return std::ranges::none_of(kFixed, [&](std::string_view fixed) { return it->condition.starts_with(fixed); });
}

}  // namespace

namespace {
void addLine(std::string& out, const std::string& l) {
  out += l + "\n";
}

// What the device is, whether it is untrusted and what uses it.
void explainDevice(std::string& out, const PciDevice& d, const HostFacts& h, const Style& st) {
  addLine(out, fmt::format("{} {} ({:04x}:{:04x}, class {:06x}, {}, driver {})", st.bold("Device"),
                           deviceLabel(h, d.address), d.vendorId, d.deviceId, d.classCode, toString(d.kind()),
                           d.driver.value_or("none")));
  if (!d.nvme.empty() && !d.nvme.front().model.empty()) addLine(out, "  model " + d.nvme.front().model);
  addLine(out, fmt::format("  untrusted: {}{}", d.untrusted() ? "yes" : "no",
                           d.thunderbolt                         ? " (Thunderbolt/USB4: " + d.thunderboltWhy + ")"
                           : d.removable == Removable::Removable ? " (removable port)"
                                                                 : ""));
  if (d.inUse.empty()) addLine(out, "  in use: no");
  for (const auto& r : d.inUse) addLine(out, "  in use: " + r.detail);
}

// The devices that share its IOMMU group, and what the mode says of the group.
void explainGroup(std::string& out, const PciDevice& d, const Status& s, const Style& st) {
  if (!d.group) {
    addLine(out, st.bold("Group") + " none: the device is not translated by an IOMMU");
    return;
  }
  const Group* g = s.host.group(*d.group);
  std::vector<std::string> members;
  if (g != nullptr) {
    for (const auto& a : g->devices) members.push_back(deviceLabel(s.host, a));
  }
  addLine(out, fmt::format("{} {}: {} ({} {})", st.bold("Group"), *d.group, g != nullptr ? g->typeText : "?",
                           members.size(), members.size() == 1 ? "device" : "devices"));
  for (const auto& m : members) addLine(out, "  " + m);
  if (auto notes = s.mode.groupNotes.find(*d.group); notes != s.mode.groupNotes.end()) {
    for (const auto& n : notes->second) addLine(out, "  " + st.dim(wrapText(n, 2, st.proseWidth())));
  }
}

void explainExposure(std::string& out, const PciDevice& d, const Status& s, const Style& st) {
  for (const auto& e : exposuresOf(s)) {
    if (e.address != d.address) continue;
    addLine(out, fmt::format("{} {}", st.bold("Exposure"),
                             e.level == Exposure::AllMemory ? st.yellow(std::string(describe(e.level)))
                                                            : std::string(describe(e.level))));
    for (const auto& r : e.reasons) {
      addLine(out, "  " + st.dim(std::string(toString(r.source)) + ":") + " " +
                       wrapText(r.text, 4 + toString(r.source).size(), st.proseWidth()));
    }
  }
}

// Each IOMMU unit's capabilities that change what a mode costs, "name caps".
std::vector<std::string> unitCaps(const HostFacts& h) {
  std::vector<std::string> caps;
  for (const auto& u : h.units) {
    if (u.intel) {
      caps.push_back(fmt::format("{} caching-mode {}, rwbf {}, pass-through {}", u.name,
                                 u.intel->cachingMode() ? "yes" : "no", u.intel->rwbf() ? "yes" : "no",
                                 u.intel->passThrough() ? "yes" : "no"));
    }
    if (u.amd) caps.push_back(fmt::format("{} np-cache {}", u.name, u.amd->npCache() ? "yes" : "no"));
  }
  return caps;
}

// The host's IOMMU, mode and kernel, its units' capabilities and the findings about the device.
void explainHost(std::string& out, const PciDevice& d, const Status& s, const Style& st) {
  const auto& h = s.host;
  std::vector<std::string> caps = unitCaps(h);
  addLine(out, fmt::format("{} {}, mode {}, kernel {}{}", st.bold("Host"), displayName(s.mode.vendor),
                           s.mode.modeName(), h.kernel.release,
                           h.kernel.upstream.version ? " (upstream " + h.kernel.upstream.version->str() + ")" : ""));
  // One line per unit would drown a big server; the caps matter when they differ.
  std::set<std::string> distinct;
  for (const auto& c : caps) distinct.insert(c.substr(c.find(' ') + 1));
  if (distinct.size() == 1) {
    addLine(out,
            "  " + *distinct.begin() + (caps.size() > 1 ? fmt::format(" (all {} units)", caps.size()) : std::string()));
  } else {
    for (const auto& c : caps) addLine(out, "  " + c);
  }
  for (const auto* f : findingsConcerning(s, d)) {
    addLine(out, fmt::format("  finding {} ({}): {}", f->id, toString(f->severity), f->title));
  }
}

void explainRule(std::string& out, const RuleEvaluation& e, const Style& st) {
  std::string state = e.matches ? st.green("matches") : st.yellow("nearly matches");
  if (!e.rule->enabled) state = st.dim("disabled by an override");
  // The verdict beside the name; the file on a line of its own, where a long path cannot push it
  // onto the next line.
  addLine(out, fmt::format("  {} {}, mode {}", st.bold(e.rule->name), state, toString(e.rule->mode)));
  addLine(out, "    " + st.dim("(" + e.rule->where.str() + ")"));
  addLine(out, "    " + st.dim(wrapText(e.rule->description, 4, st.proseWidth())));
  for (const auto& c : e.conditions) {
    addLine(out, fmt::format("    {} {:<44} {}", c.holds ? st.green("yes") : st.red("no "), c.condition, c.actual));
  }
  for (const auto& o : e.rule->overriddenBy) addLine(out, "    " + st.dim("changed by [[override]] at " + o));
}

// The rules that match or nearly match, with each condition; the others only counted.
void explainRules(std::string& out, const Status& s, const PolicySet& policies,
                  const std::vector<RuleEvaluation>& evaluations, const Style& st) {
  addLine(out, st.bold("Rules"));
  size_t others = 0;
  for (const auto& e : evaluations) {
    if (!e.matches && !nearly(e, s.mode)) {
      ++others;
      continue;
    }
    explainRule(out, e, st);
  }
  if (policies.rules.empty())
    addLine(out, "  no rules in force");
  else if (others != 0)
    addLine(out, st.dim(fmt::format("  {} other {} do not match", others, others == 1 ? "rule" : "rules")));
}

std::string unfittedExplainText(const PciDevice& d, const Status& s, const PolicySet& policies,
                                const std::vector<RuleEvaluation>& evaluations, const Plan& plan, const Style& st) {
  std::string out;
  explainDevice(out, d, s.host, st);
  explainGroup(out, d, s, st);
  explainExposure(out, d, s, st);
  explainHost(out, d, s, st);
  addLine(out, "");
  explainRules(out, s, policies, evaluations, st);
  addLine(out, "");
  addLine(out, st.bold("Decisions"));
  if (plan.changes.empty() && plan.skips.empty() && plan.satisfied.empty()) {
    addLine(out, "  none: no rule asks anything of it");
  }
  planLines(out, plan, s.host, st, true);
  return out;
}
}  // namespace

std::string explainText(const PciDevice& d, const Status& s, const PolicySet& policies,
                        const std::vector<RuleEvaluation>& evaluations, const Plan& plan, bool color, size_t width) {
  return fitLines(unfittedExplainText(d, s, policies, evaluations, plan, Style{color, width}), width);
}

std::string explainJson(const PciDevice& d, const Status& s, const std::vector<RuleEvaluation>& evaluations,
                        const Plan& plan) {
  JsonWriter w;
  w.beginObject().field("schema_version", kPlanSchemaVersion);
  w.key("device");
  writeDeviceJson(w, d);
  w.key("group");
  if (const Group* g = d.group ? s.host.group(*d.group) : nullptr) {
    w.beginObject().field("id", g->id).field("type", g->typeText).field("devices", g->devices).endObject();
  } else {
    w.null();
  }
  for (const auto& e : exposuresOf(s)) {
    if (e.address != d.address) continue;
    w.key("exposure").beginObject().field("level", toString(e.level)).key("reasons");
    writeReasonsJson(w, e.reasons);
    w.endObject();
  }
  w.key("host").beginObject().field("vendor", toString(s.mode.vendor)).field("mode", s.mode.modeName());
  w.field("release", s.host.kernel.release);
  w.key("upstream");
  s.host.kernel.upstream.version ? w.value(s.host.kernel.upstream.version->str()) : w.null();
  w.endObject();
  w.key("findings").beginArray();
  for (const auto* f : findingsConcerning(s, d)) writeFindingJson(w, *f);
  w.endArray();
  w.key("rules").beginArray();
  for (const auto& e : evaluations) {
    w.beginObject()
        .field("name", e.rule->name)
        .field("file", e.rule->where.file)
        .field("line", e.rule->where.line)
        .field("enabled", e.rule->enabled)
        .field("matches", e.matches)
        .field("nearly", nearly(e, s.mode));
    w.key("conditions").beginArray();
    for (const auto& c : e.conditions) {
      w.beginObject().field("condition", c.condition).field("holds", c.holds).field("actual", c.actual).endObject();
    }
    w.endArray().endObject();
  }
  w.endArray();
  writePlanBody(w, plan);
  w.endObject();
  return w.take();
}

}  // namespace iommud::app
