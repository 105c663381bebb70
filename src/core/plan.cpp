#include "core/plan.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <span>
#include <tuple>

#include "core/domain_change.hpp"
#include "core/domain_safety.hpp"
#include "core/initramfs.hpp"
#include "core/policy_lint.hpp"
#include "core/text.hpp"

namespace iommud::core {

std::string_view toString(Trigger t) {
  switch (t) {
    case Trigger::Hotplug: return "hotplug";
    case Trigger::Coldplug: return "coldplug";
    case Trigger::Boot: break;
  }
  return "boot";
}

std::string_view toString(ChangeKind k) {
  switch (k) {
    case ChangeKind::ModuleParam: return "module-param";
    case ChangeKind::Domain: return "domain";
    case ChangeKind::Rings: return "rings";
    case ChangeKind::Channels: return "channels";
    case ChangeKind::Coalesce: return "coalesce";
    case ChangeKind::ModprobeConf: break;
  }
  return "modprobe-conf";
}

std::string_view toString(SkipReason r) {
  switch (r) {
    case SkipReason::HotplugOnly: return "hotplug-only";
    case SkipReason::Untrusted: return "untrusted";
    case SkipReason::NeedsAcceptance: return "needs-acceptance";
    case SkipReason::InUse: return "in-use";
    case SkipReason::NeverUnbind: return "never-unbind";
    case SkipReason::GroupUncovered: return "group-uncovered";
    case SkipReason::Conflict: return "conflict";
    case SkipReason::KernelTooOld: return "kernel-too-old";
    case SkipReason::Unsupported: return "unsupported";
    case SkipReason::NoIommu: return "no-iommu";
    case SkipReason::NoNetdev: return "no-netdev";
    case SkipReason::ParamMissing: return "param-missing";
    case SkipReason::ParamReadOnly: return "param-read-only";
    case SkipReason::Overridden: break;
  }
  return "overridden";
}

namespace {

unsigned kindBit(DeviceKind k) {
  return 1U << static_cast<unsigned>(k);
}

std::string hex4(uint16_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x0000";
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(5 - i)] = digits[(v >> (4 * i)) & 0xfU];
  return s;
}

std::string hex6(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "000000";
  for (int i = 0; i < 6; ++i) s[static_cast<size_t>(5 - i)] = digits[(v >> (4 * i)) & 0xfU];
  return s;
}

template <class Range, class F>
std::string joined(const Range& items, F&& format, std::string_view sep = ", ") {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += sep;
    out += format(i);
  }
  return out;
}

std::string listOrOne(const std::string& body, size_t n) {
  return n == 1 ? body : "[" + body + "]";
}

// Host facts every rule looks at, computed once.
struct HostCtx {
  Vendor vendor = Vendor::None;
  std::string mode;
  bool cachingMode = false;
  bool rwbf = false;
  bool npCache = false;
  std::optional<KernelVersion> version;
  std::set<std::string> cmdlineKeys;
  std::set<std::string> cmdlineParams;  // "key=value"
  struct FindingScope {
    bool hostWide = false;
    std::set<int> groups;
    std::set<std::string> devices;
  };
  std::map<std::string, FindingScope> findings;
};

HostCtx hostContext(const PlanInput& in) {
  HostCtx h;
  h.vendor = in.host.iommuPresent() ? in.host.vendor() : Vendor::None;
  h.mode = in.mode.modeName();
  for (const auto& u : in.host.units) {
    if (u.intel) {
      h.cachingMode = h.cachingMode || u.intel->cachingMode();
      h.rwbf = h.rwbf || u.intel->rwbf();
    }
    if (u.amd) h.npCache = h.npCache || u.amd->npCache();
  }
  h.version = in.host.kernel.upstream.version;
  for (const auto& p : parseCmdline(in.host.kernel.cmdline)) {
    h.cmdlineKeys.insert(p.key);
    h.cmdlineParams.insert(p.value ? p.key + "=" + *p.value : p.key);
  }
  for (const auto& f : in.findings) {
    auto& s = h.findings[f.id];
    s.hostWide = s.hostWide || (f.groups.empty() && f.devices.empty());
    s.groups.insert(f.groups.begin(), f.groups.end());
    s.devices.insert(f.devices.begin(), f.devices.end());
  }
  return h;
}

// What the planner knows of a device's group: its endpoints (bridges do not count: pcieport
// manages DMA itself and stays bound through a domain change).
struct GroupCtx {
  const Group* group = nullptr;
  std::vector<const PciDevice*> endpoints;
  std::vector<const PciDevice*> members;  // every PCI function, bridges too
};

template <class Lookup>
GroupCtx groupContext(const Group& g, Lookup&& lookup) {
  GroupCtx gc;
  gc.group = &g;
  for (const auto& a : g.devices) {
    const PciDevice* m = lookup(a);
    if (m == nullptr) continue;
    gc.members.push_back(m);
    if (m->kind() != DeviceKind::Bridge) gc.endpoints.push_back(m);
  }
  return gc;
}

struct DeviceCtx {
  const PciDevice* dev = nullptr;
  DeviceKind kind = DeviceKind::Other;
  const GroupCtx* group = nullptr;
  unsigned otherKinds = 0;  // kinds of the other endpoints of the group
  int groupSize = 0;
  // What name globs match against, gathered once rather than per rule.
  std::string_view addressName, driverName;
  std::vector<std::string_view> names;  // netdevs and NVMe controllers
  [[nodiscard]] std::span<const std::string_view> address() const { return {&addressName, 1}; }
  [[nodiscard]] std::span<const std::string_view> driver() const { return {&driverName, dev->driver ? 1U : 0U}; }
  // The winning rule per setting, filled while matching (views into the rules' keys).
  const Rule* domainRule = nullptr;
  std::vector<std::pair<std::string_view, const Rule*>> rings, channels, coalesce;
};

DeviceCtx deviceContext(const PciDevice& d, const GroupCtx* g) {
  DeviceCtx c;
  c.dev = &d;
  c.kind = d.kind();
  c.group = g;
  if (d.driver) c.driverName = *d.driver;
  c.addressName = d.address;
  if (!d.netdevs.empty() || !d.nvme.empty()) c.names.reserve(d.netdevs.size() + d.nvme.size());
  for (const auto& n : d.netdevs) c.names.emplace_back(n.name);
  for (const auto& n : d.nvme) c.names.emplace_back(n.name);
  if (g != nullptr) {
    c.groupSize = static_cast<int>(g->endpoints.size());
    for (const auto* o : g->endpoints) {
      if (o != &d) c.otherKinds |= kindBit(o->kind());
    }
  }
  return c;
}

// Evaluates conditions either short-circuiting (planning) or collecting every result (explain).
template <bool Collect>
class Eval {
 public:
  explicit Eval(std::vector<ConditionResult>* out) : out_(out) {}
  template <class Describe>
  bool operator()(bool holds, Describe&& describe) {
    all_ = all_ && holds;
    if constexpr (Collect) {
      auto [cond, actual] = describe();
      out_->push_back(ConditionResult{std::move(cond), holds, std::move(actual)});
      return true;
    } else {
      (void)describe;
      return holds;
    }
  }
  [[nodiscard]] bool all() const { return all_; }

 private:
  std::vector<ConditionResult>* out_;
  bool all_ = true;
};

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

template <bool Collect>
bool matchDevice(const DeviceMatch& m, const DeviceCtx& c, Eval<Collect>& e, const char* prefix) {
  const PciDevice& d = *c.dev;
  using P = std::pair<std::string, std::string>;
  auto ids = [&](const char* key, const std::vector<uint16_t>& want, uint16_t have) {
    return want.empty() || e(contains(want, have), [&] {
             return P{std::string(prefix) + key + " = " + listOrOne(joined(want, hex4), want.size()), hex4(have)};
           });
  };
  auto flag = [&](const char* key, const std::optional<bool>& want, bool have) {
    return !want || e(*want == have, [&] {
      return P{std::string(prefix) + key + " = " + (*want ? "true" : "false"), have ? "true" : "false"};
    });
  };
  auto quoted = [](const std::string& s) { return "\"" + s + "\""; };
  if (!m.kinds.empty() && !e(contains(m.kinds, c.kind), [&] {
        return P{std::string(prefix) + "kind = " +
                     listOrOne(joined(m.kinds, [&](DeviceKind k) { return quoted(std::string(toString(k))); }),
                               m.kinds.size()),
                 std::string(toString(c.kind))};
      })) {
    return false;
  }
  if (!ids("vendor", m.vendor, d.vendorId) || !ids("device", m.device, d.deviceId) ||
      !ids("subsystem-vendor", m.subsystemVendor, d.subsystemVendorId) ||
      !ids("subsystem-device", m.subsystemDevice, d.subsystemDeviceId)) {
    return false;
  }
  if (!m.classes.empty() &&
      !e(std::any_of(m.classes.begin(), m.classes.end(), [&](const ClassPattern& p) { return p.matches(d.classCode); }),
         [&] {
           return P{std::string(prefix) + "class = " +
                        listOrOne(joined(m.classes,
                                         [&](const ClassPattern& p) {
                                           return quoted(hex6(p.value).substr(static_cast<size_t>(6 - p.digits)));
                                         }),
                                  m.classes.size()),
                    hex6(d.classCode)};
         })) {
    return false;
  }
  auto globs = [&](const char* key, const std::vector<Glob>& pats, std::span<const std::string_view> names) {
    if (pats.empty()) return true;
    bool hit = std::any_of(pats.begin(), pats.end(), [&](const Glob& p) {
      return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return p.matches(n); });
    });
    return e(hit, [&] {
      return P{std::string(prefix) + key + " = " +
                   listOrOne(joined(pats, [&](const Glob& g) { return quoted(g.str()); }), pats.size()),
               names.empty() ? "(none)" : joined(names, [](std::string_view n) { return std::string(n); })};
    });
  };
  if (!flag("removable", m.removable, d.removable == Removable::Removable) ||
      !flag("thunderbolt", m.thunderbolt, d.thunderbolt) || !flag("untrusted", m.untrusted, d.untrusted()) ||
      !flag("in-use", m.inUse, !d.inUse.empty())) {
    return false;
  }
  if (m.groupSize && !e(m.groupSize->contains(c.groupSize), [&] {
        return P{std::string(prefix) + "group-size = " + m.groupSize->str(), std::to_string(c.groupSize)};
      })) {
    return false;
  }
  if (!flag("shares-group", m.sharesGroup, c.groupSize > 1)) return false;
  if (!m.sharesGroupWith.empty()) {
    unsigned want = 0;
    for (auto k : m.sharesGroupWith) want |= kindBit(k);
    if (!e((c.otherKinds & want) != 0, [&] {
          std::vector<std::string> others;
          for (auto k : {DeviceKind::Nic, DeviceKind::Nvme, DeviceKind::Bridge, DeviceKind::Other}) {
            if ((c.otherKinds & kindBit(k)) != 0) others.emplace_back(toString(k));
          }
          return P{
              std::string(prefix) + "shares-group-with = " +
                  listOrOne(joined(m.sharesGroupWith, [&](DeviceKind k) { return quoted(std::string(toString(k))); }),
                            m.sharesGroupWith.size()),
              others.empty() ? "(alone)" : joined(others, [](const std::string& s) { return s; })};
        })) {
      return false;
    }
  }
  // Globs last: the cheap comparisons above rule most devices out first.
  return globs("address", m.addresses, c.address()) && globs("driver", m.drivers, c.driver()) &&
         globs("name", m.names, c.names);
}

template <bool Collect>
bool matchHost(const HostMatch& m, const HostCtx& h, Eval<Collect>& e, const DeviceCtx* c) {
  using P = std::pair<std::string, std::string>;
  auto quoted = [](const std::string& s) { return "\"" + s + "\""; };
  if (!m.iommu.empty() && !e(contains(m.iommu, h.vendor), [&] {
        return P{
            "host.iommu = " +
                listOrOne(joined(m.iommu, [&](Vendor v) { return quoted(std::string(toString(v))); }), m.iommu.size()),
            std::string(toString(h.vendor))};
      })) {
    return false;
  }
  if (!m.mode.empty() && !e(contains(m.mode, h.mode), [&] {
        return P{"host.mode = " + listOrOne(joined(m.mode, quoted), m.mode.size()), h.mode};
      })) {
    return false;
  }
  auto flag = [&](const char* key, const std::optional<bool>& want, bool have) {
    return !want || e(*want == have, [&] {
      return P{std::string("host.") + key + " = " + (*want ? "true" : "false"), have ? "true" : "false"};
    });
  };
  if (!flag("caching-mode", m.cachingMode, h.cachingMode) || !flag("rwbf", m.rwbf, h.rwbf) ||
      !flag("np-cache", m.npCache, h.npCache)) {
    return false;
  }
  if (m.kernel && !e(h.version && m.kernel->contains(*h.version), [&] {
        return P{"host.kernel = \"" + m.kernelText + "\"", h.version ? h.version->str() : "unknown"};
      })) {
    return false;
  }
  for (const auto& p : m.cmdline) {
    bool has = p.find('=') == std::string::npos ? h.cmdlineKeys.contains(p) : h.cmdlineParams.contains(p);
    if (!e(has, [&] { return P{"host.cmdline has \"" + p + "\"", has ? "present" : "absent"}; })) return false;
  }
  for (const auto& p : m.cmdlineAbsent) {
    bool has = p.find('=') == std::string::npos ? h.cmdlineKeys.contains(p) : h.cmdlineParams.contains(p);
    if (!e(!has, [&] { return P{"host.cmdline-absent has \"" + p + "\"", has ? "present" : "absent"}; })) return false;
  }
  for (const auto& id : m.findings) {
    auto it = h.findings.find(id);
    bool hit = false;
    if (it != h.findings.end()) {
      const auto& s = it->second;
      hit = s.hostWide || c == nullptr || s.devices.contains(c->dev->address) ||
            (c->dev->group && s.groups.contains(*c->dev->group));
    }
    if (!e(hit, [&] {
          return P{"host.finding = \"" + id + "\"", it == h.findings.end() ? "not present"
                                                    : hit                  ? "present"
                                                                           : "present, not for this device"};
        })) {
      return false;
    }
  }
  return true;
}

template <bool Collect>
bool matchRule(const Rule& r, const HostCtx& h, const DeviceCtx& c, Eval<Collect>& e) {
  if (!matchDevice(r.device, c, e, "") && !Collect) return false;
  // Each [[rule.unless]] entry excludes the device when all its conditions hold.
  for (const auto& unless : r.unless) {
    std::vector<ConditionResult> inner;
    Eval<Collect> ue(Collect ? &inner : nullptr);
    bool unlessHolds = matchDevice(unless, c, ue, "unless.") && ue.all();
    if (!e(!unlessHolds,
           [&] {
             // "unless driver = "vfio-pci"", with what the device has: the row reads as the rule does.
             std::string conds;
             std::string actual;
             for (const auto& ci : inner) {
               std::string_view cond = ci.condition;
               if (cond.starts_with("unless.")) cond.remove_prefix(7);
               conds += (conds.empty() ? "unless " : " and ") + std::string(cond);
               actual += (actual.empty() ? "" : ", ") + ci.actual;
             }
             return std::pair<std::string, std::string>{conds, actual};
           }) &&
        !Collect) {
      return false;
    }
  }
  return matchHost(r.host, h, e, &c) || Collect;
}

// The resolved type `auto` stands for: the boot default, strict DMA for untrusted devices.
std::optional<DomainType> resolveRequest(DomainRequest r, const HostMode& mode, bool untrusted) {
  switch (r) {
    case DomainRequest::Identity: return DomainType::Identity;
    case DomainRequest::Dma: return DomainType::Dma;
    case DomainRequest::DmaFq: return DomainType::DmaFq;
    case DomainRequest::Auto: break;
  }
  if (untrusted) return DomainType::Dma;
  return mode.defaultType;
}

std::string deviceList(const GroupCtx& g) {
  return joined(g.endpoints, [](const PciDevice* d) { return d->displayName(); });
}

RuleRef refOf(const Rule& r) {
  return RuleRef{r.name, r.where};
}

// How a plan names a refusal of the domain predicate.
SkipReason skipReasonOf(DomainRefusal r) {
  switch (r) {
    case DomainRefusal::Untrusted: return SkipReason::Untrusted;
    case DomainRefusal::KernelRule: return SkipReason::KernelTooOld;
    case DomainRefusal::InUse: return SkipReason::InUse;
    case DomainRefusal::NeverUnbind: return SkipReason::NeverUnbind;
    case DomainRefusal::NoDefaultDomain:
    case DomainRefusal::NoPassThrough:
    case DomainRefusal::DeviceForbids: break;
  }
  return SkipReason::Unsupported;
}

// The image boots would load `module` from, when it holds it or could not be listed: its copy of
// modprobe.d is what the boot-time load reads.
std::optional<InitramfsRebuild> initramfsFor(const KernelInfo& k, const std::string& module) {
  const Initramfs& i = k.initramfs;
  const bool holds = i.state == Initramfs::State::Listed && i.modules.contains(canonicalModuleName(module));
  if (!holds && i.state != Initramfs::State::Unreadable) return std::nullopt;
  return InitramfsRebuild{i.image, initramfsRebuildCommand(i.generator, k.release), holds};
}

// When a modprobe.d line (`setting`, "poll_queues=4") for `module` takes effect, now and at boot.
std::string loadTimeNote(const std::string& module, const std::string& setting, bool running,
                         const std::optional<InitramfsRebuild>& rebuild, const std::string& unreadable) {
  if (!rebuild) {
    return running ? "already in effect now; the file keeps it across reboots"
                   : "takes effect when " + module + " is next loaded (reload the module or reboot)";
  }
  std::string now =
      running ? "already in effect now" : "takes effect when " + module + " is next loaded (reload the module)";
  const std::string rebuilds = "`" + rebuild->command + "` rebuilds it";
  if (rebuild->checked) {
    return now + "; " + module + " is in the initramfs " + rebuild->image + ": until " + rebuilds + ", boots load " +
           module + " without " + setting;
  }
  return now + "; the initramfs " + rebuild->image + " could not be checked for " + module + " (" + unreadable +
         "): if it holds " + module + ", boots load it without " + setting + " until " + rebuilds;
}

// Whether a module parameter's value is `b` (booleans print as Y/N whatever was written).
bool sameValue(const std::string& a, const std::string& b) {
  auto canon = [](const std::string& s) -> std::string {
    if (s == "1" || s == "Y" || s == "y") return "Y";
    if (s == "0" || s == "N" || s == "n") return "N";
    return s;
  };
  return a == b || canon(a) == canon(b);
}

constexpr std::string_view kModprobePrefix = "/etc/modprobe.d/iommud-";

// The module of a modprobe.d change: its object is kModprobePrefix + module + ".conf".
std::string modprobeModule(const Change& c) {
  return c.object.substr(kModprobePrefix.size(), c.object.size() - kModprobePrefix.size() - 5);
}

// When a modprobe.d change takes effect, with what the host knows of its initramfs.
void noteLoadTime(Change& c, const HostFacts& host) {
  const std::string module = modprobeModule(c);
  bool running = false;
  if (auto m = host.modules.find(module); m != host.modules.end()) {
    auto p = m->second.params.find(c.key);
    running = p != m->second.params.end() && sameValue(p->second.value, c.to);
  }
  c.initramfs = initramfsFor(host.kernel, module);
  c.note = loadTimeNote(module, c.key + "=" + c.to, running, c.initramfs, host.kernel.initramfs.reason);
}

// The devices by what rule conditions name, so that a rule is tried only on the devices its most
// selective condition can select: a PCI id, a kind, or the literal prefix of an address, name or
// driver glob (names and addresses sorted make each prefix a range).
class DeviceIndex {
 public:
  explicit DeviceIndex(std::vector<DeviceCtx>& devices) : all_(devices.size()) {
    for (size_t i = 0; i < devices.size(); ++i) {
      DeviceCtx* c = &devices[i];
      all_[i] = c;
      kinds_[static_cast<size_t>(c->kind)].push_back(c);
      vendors_.emplace_back(c->dev->vendorId, c);
      addresses_.emplace_back(c->addressName, c);
      for (auto n : c->names) names_.emplace_back(n, c);
      for (auto d : c->driver()) drivers_.emplace_back(d, c);
    }
    for (auto* keyed : {&addresses_, &names_, &drivers_}) {
      if (!std::is_sorted(keyed->begin(), keyed->end())) std::sort(keyed->begin(), keyed->end());
    }
    std::sort(vendors_.begin(), vendors_.end());
  }

  // The devices `m` may match, in host order: a superset, as every condition is checked after.
  [[nodiscard]] std::vector<DeviceCtx*> candidates(const DeviceMatch& m) const {
    using Run = std::pair<const Keyed*, std::vector<std::pair<size_t, size_t>>>;
    std::optional<Run> best;
    size_t bestCount = all_.size();
    auto consider = [&](const Keyed& keyed, const std::vector<Glob>& globs) {
      if (globs.empty()) return;
      Run run{&keyed, {}};
      size_t count = 0;
      for (const auto& g : globs) {
        std::string_view prefix = g.literalPrefix();
        auto lo = std::lower_bound(keyed.begin(), keyed.end(), prefix,
                                   [](const auto& e, std::string_view p) { return e.first < p; });
        // Names with the prefix follow their lower bound contiguously.
        auto hi = std::partition_point(lo, keyed.end(), [&](const auto& e) { return e.first.starts_with(prefix); });
        run.second.emplace_back(lo - keyed.begin(), hi - keyed.begin());
        count += static_cast<size_t>(hi - lo);
      }
      if (count < bestCount) {
        bestCount = count;
        best = std::move(run);
      }
    };
    consider(addresses_, m.addresses);
    consider(names_, m.names);
    consider(drivers_, m.drivers);
    size_t vendorCount = 0;
    for (auto v : m.vendor) vendorCount += vendorRange(v).size();
    size_t kindCount = 0;
    for (auto k : m.kinds) kindCount += kinds_[static_cast<size_t>(k)].size();

    std::vector<DeviceCtx*> out;
    if (!m.vendor.empty() && vendorCount <= std::min(bestCount, m.kinds.empty() ? bestCount : kindCount)) {
      for (auto v : m.vendor) {
        for (const auto& e : vendorRange(v)) out.push_back(e.second);
      }
    } else if (!m.kinds.empty() && kindCount <= bestCount) {
      for (auto k : m.kinds)
        out.insert(out.end(), kinds_[static_cast<size_t>(k)].begin(), kinds_[static_cast<size_t>(k)].end());
      if (m.kinds.size() == 1) return out;  // already in host order
    } else if (best) {
      for (auto [lo, hi] : best->second) {
        for (size_t i = lo; i < hi; ++i) out.push_back((*best->first)[i].second);
      }
    } else {
      return all_;
    }
    // Host order, each device once (a device has several names; globs may overlap).
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

 private:
  using Keyed = std::vector<std::pair<std::string_view, DeviceCtx*>>;
  [[nodiscard]] std::span<const std::pair<uint16_t, DeviceCtx*>> vendorRange(uint16_t v) const {
    auto lo =
        std::lower_bound(vendors_.begin(), vendors_.end(), v, [](const auto& e, uint16_t x) { return e.first < x; });
    auto hi = std::upper_bound(lo, vendors_.end(), v, [](uint16_t x, const auto& e) { return x < e.first; });
    return {lo, hi};
  }

  std::vector<DeviceCtx*> all_;  // host order, which is pointer order
  std::array<std::vector<DeviceCtx*>, 4> kinds_;
  std::vector<std::pair<uint16_t, DeviceCtx*>> vendors_;
  Keyed addresses_, names_, drivers_;
};

// The planner's state for one run.
class Planner {
 public:
  Planner(const PlanInput& in, const PolicySet& policies, const PlanOptions& options)
      : in_(in), policies_(policies), options_(options), host_(hostContext(in)) {}

  Plan run() {
    buildContexts();
    // Most devices end in a change, a skip or a satisfied setting: grow once, not log n times.
    plan_.changes.reserve(devices_.size());
    plan_.skips.reserve(devices_.size());
    std::vector<const Rule*> live;
    for (const auto& r : policies_.rules) {
      if (!r.enabled) continue;
      // At boot only boot rules exist: the others are the daemon's, later, and not worth a word.
      if (options_.trigger == Trigger::Boot && r.when != When::Boot) continue;
      Eval<false> e(nullptr);
      if (matchHostOnly(r, e)) live.push_back(&r);
    }
    // Rules are tried in their order, each only on the devices its most selective condition can
    // select; per device, wishes still arrive in rule order, so the last matching rule wins.
    // For one device, only its group matters, and other devices only for module parameters
    // (global to a module, so their rules can conflict with the device's).
    const PciDevice* focus = options_.device ? in_.host.device(*options_.device) : nullptr;
    auto inFocus = [&](const DeviceCtx& c) {
      return focus == nullptr || c.dev == focus || (focus->group && c.dev->group == focus->group);
    };
    std::vector<DeviceCtx*> focusGroup;
    if (focus != nullptr) {
      for (auto& c : devices_) {
        if (inFocus(c)) focusGroup.push_back(&c);
      }
    }
    const DeviceIndex index(devices_);
    for (const Rule* r : live) {
      auto candidates = focus != nullptr && r->params.empty() ? focusGroup : index.candidates(r->device);
      for (DeviceCtx* c : candidates) {
        Eval<false> e(nullptr);
        if (matchRule(*r, host_, *c, e)) collectWishes(*c, *r, inFocus(*c));
      }
    }
    planDomains();
    planEthtool();
    planParams();
    finish();
    return std::move(plan_);
  }

 private:
  struct ParamWish {
    const Rule* rule;
    const ParamSetting* param;
    std::string module;
  };

  // Host conditions that do not depend on the device (all but `finding`) decide whether a rule
  // is worth trying on every device at all.
  bool matchHostOnly(const Rule& r, Eval<false>& e) {
    HostMatch m = r.host;
    m.findings.clear();
    return matchHost(m, host_, e, nullptr) &&
           std::all_of(r.host.findings.begin(), r.host.findings.end(),
                       [&](const std::string& id) { return host_.findings.contains(id); });
  }

  void buildContexts() {
    // HostFacts keeps devices in address order: lookups by address are binary searches.
    auto lookup = [&](const std::string& a) { return in_.host.device(a); };
    groups_.reserve(in_.host.groups.size());
    groupIndex_.reserve(in_.host.groups.size());
    for (const auto& g : in_.host.groups) {
      groupIndex_.emplace_back(g.id, groups_.size());
      groups_.push_back(groupContext(g, lookup));
    }
    std::sort(groupIndex_.begin(), groupIndex_.end());
    devices_.reserve(in_.host.devices.size());
    for (const auto& d : in_.host.devices) {
      const GroupCtx* g = nullptr;
      if (d.group) {
        auto it = std::lower_bound(groupIndex_.begin(), groupIndex_.end(), std::pair{*d.group, size_t{0}});
        if (it != groupIndex_.end() && it->first == *d.group) g = &groups_[it->second];
      }
      devices_.push_back(deviceContext(d, g));
    }
  }

  // Per device and setting, the last matching rule wins; the earlier one becomes an `overridden`
  // skip when asked for (explain). `wanted` names the earlier rule's value, built only then.
  template <class Wanted>
  void overridden(const DeviceCtx& c, const Rule& old, const Rule& r, ChangeKind kind, std::string_view object,
                  std::string_view keyName, Wanted&& wanted) {
    if (!options_.reportOverridden) return;
    skip(kind, c.dev->address, std::string(object), std::string(keyName), wanted(old), old, SkipReason::Overridden,
         "rule '" + r.name + "' (" + r.where.str() + "), later in the order, sets it too");
  }

  template <class Wanted>
  void wish(std::vector<std::pair<std::string_view, const Rule*>>& wishes, std::string_view key, const Rule& r,
            ChangeKind kind, const DeviceCtx& c, Wanted&& wanted) {
    for (auto& [k, rule] : wishes) {
      if (k == key) {
        overridden(c, *rule, r, kind, toString(kind), key, wanted);
        rule = &r;
        return;
      }
    }
    wishes.emplace_back(key, &r);
  }

  void collectWishes(DeviceCtx& c, const Rule& r, bool all) {
    if (!all) {
      collectParamWishes(c, r);
      return;
    }
    // Bridges are no subject of a domain change: pcieport manages DMA itself and stays bound.
    if (r.domain && c.kind != DeviceKind::Bridge) {
      if (c.domainRule != nullptr) {
        overridden(c, *c.domainRule, r, ChangeKind::Domain, groupName(c), "type",
                   [](const Rule& old) { return std::string(toString(*old.domain)); });
      }
      c.domainRule = &r;
    }
    for (const auto& [k, v] : r.rings) {
      wish(c.rings, k, r, ChangeKind::Rings, c, [&k = k](const Rule& old) { return old.rings.at(k).str(); });
    }
    for (const auto& [k, v] : r.channels) {
      wish(c.channels, k, r, ChangeKind::Channels, c, [&k = k](const Rule& old) { return old.channels.at(k).str(); });
    }
    for (const auto& [k, v] : r.coalesce) {
      wish(c.coalesce, k, r, ChangeKind::Coalesce, c,
           [&k = k](const Rule& old) { return std::to_string(old.coalesce.at(k)); });
    }
    collectParamWishes(c, r);
  }

  void collectParamWishes(const DeviceCtx& c, const Rule& r) {
    const std::string& a = c.dev->address;
    for (const auto& p : r.params) {
      std::string module = p.module.empty() ? c.dev->driverModule : p.module;
      if (module.empty() && c.dev->driver) module = *c.dev->driver;
      if (module.empty()) {
        skip(ChangeKind::ModuleParam, a, "(no driver)", p.name, p.value, r, SkipReason::ParamMissing,
             "the device has no driver, and the rule names no module for parameter " + p.name);
        continue;
      }
      auto key = std::tuple{std::string_view(a), module, std::string_view(p.name), p.at};
      auto [it, fresh] = paramWish_.try_emplace(key, ParamWish{&r, &p, module});
      if (!fresh && options_.reportOverridden) {
        skip(p.at == ParamSetting::At::Load ? ChangeKind::ModprobeConf : ChangeKind::ModuleParam, a,
             module + "." + p.name, p.name, it->second.param->value, *it->second.rule, SkipReason::Overridden,
             "rule '" + r.name + "' (" + r.where.str() + "), later in the order, sets it too");
      }
      if (!fresh) it->second = ParamWish{&r, &p, module};
    }
  }

  // devices_ runs parallel to the host's devices.
  const DeviceCtx& contextOf(const PciDevice& d) const {
    return devices_[static_cast<size_t>(&d - in_.host.devices.data())];
  }

  std::string groupName(const DeviceCtx& c) const {
    return c.dev->group ? "group " + std::to_string(*c.dev->group) : "(no group)";
  }

  void skip(ChangeKind kind, const std::string& device, std::string object, std::string key, std::string wanted,
            const Rule& r, SkipReason reason, std::string message) {
    plan_.skips.push_back(
        Skip{kind, device, std::move(object), std::move(key), std::move(wanted), refOf(r), reason, std::move(message)});
  }

  RuleMode modeOf(const Rule& r) const { return options_.adviseOnly ? RuleMode::Advise : r.mode; }

  // A rule acts at coldplug if it says `always`, or says nothing or `boot` and the change is not
  // disruptive: a boot rule's disruptive changes belong to the moments nothing holds the device
  // (boot and hotplug). At boot only boot rules are planned at all, and they act fully.
  bool allowedNow(const Rule& r, bool disruptive) const {
    if (options_.trigger != Trigger::Coldplug || modeOf(r) == RuleMode::Advise) return true;
    switch (r.when.value_or(disruptive ? When::Hotplug : When::Always)) {
      case When::Always: return true;
      case When::Boot: return !disruptive;
      case When::Hotplug: break;
    }
    return false;
  }

  static std::string hotplugOnlyMessage(const Rule& r, const std::string& what) {
    if (r.when == When::Boot) {
      return what +
             " acts only at boot (iommud --early, before anything holds the device) or when the device "
             "has just appeared (the rule says when = \"boot\"; rebuild the initramfs after changing it)";
    }
    return what + " acts only when the device has just appeared" +
           (r.when
                ? std::string(" (the rule says when = \"hotplug\")")
                : std::string(" (disruptive changes default to hotplug; set when = \"always\" to allow it at start)"));
  }

  void planDomains() {
    // Group by IOMMU group, in the order of the groups' first endpoint.
    std::map<int, std::vector<const DeviceCtx*>> wishing;
    for (const auto& c : devices_) {
      if (c.domainRule == nullptr) continue;
      if (c.group == nullptr) {
        const Rule& w = *c.domainRule;
        skip(ChangeKind::Domain, c.dev->address, "(no group)", "type", std::string(toString(*w.domain)), w,
             SkipReason::NoIommu, c.dev->displayName() + " is not behind an IOMMU: it has no group to set");
        continue;
      }
      wishing[c.group->group->id].push_back(&c);
    }
    for (const auto& [id, wishers] : wishing) planGroup(*wishers.front()->group, wishers);
  }

  void planGroup(const GroupCtx& g, const std::vector<const DeviceCtx*>& wishers) {
    const Group& group = *g.group;
    const DeviceCtx& first = *wishers.front();
    const std::string object = "group " + std::to_string(group.id);
    const std::string& lead = g.endpoints.empty() ? first.dev->address : g.endpoints.front()->address;
    std::vector<const Rule*> rules;
    for (const auto* w : wishers) {
      const Rule* r = w->domainRule;
      if (!contains(rules, r)) rules.push_back(r);
    }
    const Rule& rule = *rules.front();
    const std::string wanted(toString(*rule.domain));
    auto refuse = [&](SkipReason reason, const std::string& message) {
      for (const Rule* r : rules)
        skip(ChangeKind::Domain, lead, object, "type", std::string(toString(*r->domain)), *r, reason, message);
    };

    // The type belongs to the group: every endpoint must want the same.
    for (const auto* ep : g.endpoints) {
      if (contextOf(*ep).domainRule == nullptr) {
        refuse(SkipReason::GroupUncovered, object + " also holds " + ep->displayName() + " (" + ep->address +
                                               "), which no rule covers; a domain type is set for the whole group");
        return;
      }
    }
    for (const Rule* r : rules) {
      if (*r->domain != *rule.domain) {
        refuse(SkipReason::Conflict, "rules disagree on " + object + ": '" + rule.name + "' wants " + wanted + ", '" +
                                         r->name + "' wants " + std::string(toString(*r->domain)));
        return;
      }
    }
    bool untrusted =
        std::any_of(g.endpoints.begin(), g.endpoints.end(), [](const PciDevice* d) { return d->untrusted(); });
    auto target = resolveRequest(*rule.domain, in_.mode, untrusted);
    if (!target) {
      refuse(SkipReason::Unsupported,
             object + " has no default domain the kernel lets iommud change (type reads \"" + group.typeText + "\")");
      return;
    }
    std::string targetName(toString(*target));
    if (group.type == target) {
      plan_.satisfied.push_back(Satisfied{ChangeKind::Domain, lead, object, "type", targetName, refOf(rule)});
      return;
    }
    // The safety rules and the kernel's, judged once for the planner and the transaction alike
    // (core/domain_safety); being in use comes last, after the trade-off is accepted.
    const auto safety = judgeDomainChange(in_.host, group, *target);
    const bool inUse = safety.refusal == DomainRefusal::InUse || safety.refusal == DomainRefusal::NeverUnbind;
    if (!safety.allowed() && !inUse) {
      refuse(skipReasonOf(*safety.refusal), safety.message);
      return;
    }
    const bool live = safety.way.verdict.live;
    Risk risk = Risk::None;
    std::string tradeOff;
    auto names = deviceList(g);
    if (*target == DomainType::Identity) {
      risk = Risk::High;
      tradeOff = object + " (" + names +
                 ") set to identity: these devices can DMA to all memory; a faulty or compromised device or its "
                 "firmware is no longer contained";
    } else if (*target == DomainType::DmaFq) {
      risk = Risk::Medium;
      tradeOff = object + " (" + names +
                 ") set to DMA-FQ: unmapped buffers stay reachable by these devices until the next batched IOTLB "
                 "flush (about 10 ms)";
    } else {
      tradeOff = object + " (" + names + ") set to " + targetName +
                 ": strict translation, each device reaches only the buffers mapped for it; protection gained";
    }
    for (const Rule* r : rules) {
      if (modeOf(*r) != RuleMode::Apply) continue;
      auto need = acceptanceFor(*target);
      if (need && !r->accepted(*need)) {
        skip(ChangeKind::Domain, lead, object, "type", targetName, *r, SkipReason::NeedsAcceptance,
             "rule '" + r->name + "' asks for " + targetName + " but does not accept the trade-off: " + tradeOff +
                 ". " + howToAccept(*need));
        return;
      }
    }
    const bool advise =
        std::any_of(rules.begin(), rules.end(), [&](const Rule* r) { return modeOf(*r) == RuleMode::Advise; });
    std::string note;
    if (!live) {
      if (inUse && advise) {
        note = "a rebind is needed and " + inUseWhy(*safety.device) +
               "; apply it where nothing holds the device yet (at boot)";
      } else if (inUse) {
        refuse(skipReasonOf(*safety.refusal), safety.message);
        return;
      }
      for (const Rule* r : rules) {
        if (!allowedNow(*r, true)) {
          refuse(SkipReason::HotplugOnly, hotplugOnlyMessage(*r, "changing " + object + " rebinds its drivers; it"));
          return;
        }
      }
    } else {
      note =
          "DMA -> DMA-FQ is done with drivers bound and cannot be undone until the devices are unbound or the "
          "machine reboots";
    }
    Change ch;
    ch.kind = ChangeKind::Domain;
    ch.device = lead;
    for (const auto* ep : g.endpoints) ch.devices.push_back(ep->address);
    ch.group = group.id;
    ch.object = object;
    ch.key = "type";
    ch.from = std::string(toString(*group.type));
    ch.to = targetName;
    ch.rule = refOf(rule);
    ch.mode = advise ? RuleMode::Advise : RuleMode::Apply;
    ch.risk = risk;
    ch.tradeOff = tradeOff;
    ch.disruptive = !live;
    ch.irreversible = live;
    ch.note = note;
    plan_.changes.push_back(std::move(ch));
  }

  // What the running kernel cannot do (docs/kernel.md §2.1), or nullopt.
  void planEthtool() {
    for (const auto& c : devices_) {
      planEthtoolKind(c, c.rings, ChangeKind::Rings, ringKeys(), true);
      planEthtoolKind(c, c.channels, ChangeKind::Channels, channelKeys(), true);
      planEthtoolKind(c, c.coalesce, ChangeKind::Coalesce, coalesceKeys(), false);
    }
  }

  void planEthtoolKind(const DeviceCtx& c, const std::vector<std::pair<std::string_view, const Rule*>>& wishes,
                       ChangeKind kind, const std::vector<EthtoolKey>& keys, bool disruptive) {
    const std::string& a = c.dev->address;
    for (const auto& [keyView, rule] : wishes) {
      const std::string key(keyView);
      const Rule& r = *rule;
      const EthtoolKey* k = findEthtoolKey(keys, key);
      std::optional<uint32_t> value;
      bool isMax = false;
      if (kind == ChangeKind::Rings) {
        value = r.rings.at(key).value;
        isMax = !value;
      } else if (kind == ChangeKind::Channels) {
        value = r.channels.at(key).value;
        isMax = !value;
      } else {
        value = r.coalesce.at(key);
      }
      std::string wanted = isMax ? "max" : formatEthtoolValue(k->type, *value);
      if (c.dev->netdevs.empty()) {
        skip(kind, a, std::string(toString(kind)), key, wanted, r, SkipReason::NoNetdev,
             c.dev->displayName() + " has no network interface to set " + key + " on");
        continue;
      }
      if (host_.version && *host_.version < k->since) {
        skip(kind, a, std::string(toString(kind)), key, wanted, r, SkipReason::KernelTooOld,
             "ethtool " + std::string(toString(kind)) + " " + key + " needs Linux " + k->since.str() +
                 " (this kernel is " + host_.version->str() + ")");
        continue;
      }
      for (const auto& n : c.dev->netdevs) {
        planEthtoolValue(c, n, kind, *k, r, value, wanted, disruptive);
      }
    }
  }

  void planEthtoolValue(const DeviceCtx& c, const NetDev& n, ChangeKind kind, const EthtoolKey& k, const Rule& r,
                        std::optional<uint32_t> value, const std::string& wanted, bool disruptive) {
    const std::string key(k.name);
    const auto& e = n.ethtool;
    const auto* current = kind == ChangeKind::Rings      ? &e.rings
                          : kind == ChangeKind::Channels ? &e.channels
                                                         : &e.coalesce;
    const auto* maxima = kind == ChangeKind::Rings      ? &e.ringsMax
                         : kind == ChangeKind::Channels ? &e.channelsMax
                                                        : nullptr;
    std::string from = "unknown";
    std::string to = wanted;
    std::string note;
    if (e.read) {
      auto cur = current->find(key);
      if (cur == current->end()) {
        skip(kind, c.dev->address, n.name, key, wanted, r, SkipReason::Unsupported,
             n.name + " (" + c.dev->driver.value_or("no driver") + ") does not report " + std::string(toString(kind)) +
                 " " + key + ": its driver does not support it");
        return;
      }
      from = formatEthtoolValue(k.type, cur->second);
      std::optional<uint32_t> max;
      if (maxima != nullptr) {
        if (auto m = maxima->find(key); m != maxima->end()) max = m->second;
      }
      if (!value) {
        if (!max) {
          skip(kind, c.dev->address, n.name, key, wanted, r, SkipReason::Unsupported,
               n.name + " reports no maximum for " + key);
          return;
        }
        value = max;
      } else if (max && *value > *max) {
        skip(kind, c.dev->address, n.name, key, wanted, r, SkipReason::Unsupported,
             n.name + " allows at most " + std::to_string(*max) + " for " + key + "; the kernel would refuse " +
                 std::to_string(*value));
        return;
      }
      to = formatEthtoolValue(k.type, *value);
      if (cur->second == *value) {
        plan_.satisfied.push_back(Satisfied{kind, c.dev->address, n.name, key, to, refOf(r)});
        return;
      }
    } else {
      note = "current values not read (no ethtool access under --root)";
    }
    if (!allowedNow(r, disruptive)) {
      skip(kind, c.dev->address, n.name, key, to, r, SkipReason::HotplugOnly,
           hotplugOnlyMessage(r, "setting " + std::string(toString(kind)) + " resets the link on many drivers; it"));
      return;
    }
    // A safety rule, not a default: at start (package installation, restart, `iommuctl apply`)
    // no rule, not even one saying when = "always", resets the link of a NIC that carries traffic.
    if (disruptive && options_.trigger == Trigger::Coldplug && modeOf(r) == RuleMode::Apply && !c.dev->inUse.empty()) {
      skip(kind, c.dev->address, n.name, key, to, r, SkipReason::InUse,
           n.name + " is in use (" + c.dev->inUse.front().detail + "): setting " + std::string(toString(kind)) +
               " resets the link on many drivers, which iommud never does to a NIC in use at start, whatever "
               "the rule's `when`; it acts when the device next appears, or now with `iommuctl apply --hotplug "
               "--device " +
               n.name + "`");
      return;
    }
    Change ch;
    ch.kind = kind;
    ch.device = c.dev->address;
    ch.devices = {c.dev->address};
    ch.group = c.dev->group;
    ch.object = n.name;
    ch.key = key;
    ch.from = from;
    ch.to = to;
    ch.rule = refOf(r);
    ch.mode = modeOf(r);
    ch.tradeOff = "does not change DMA isolation";
    ch.disruptive = disruptive;
    ch.note = disruptive ? (note.empty() ? "" : note + "; ") + std::string("may reset the link") : note;
    plan_.changes.push_back(std::move(ch));
  }

  void planParams() {
    // A parameter is global to its module: gather what every device's rules want.
    struct Wanted {
      std::vector<std::pair<std::string, const ParamWish*>> byDevice;
    };
    std::map<std::tuple<std::string, std::string, ParamSetting::At>, Wanted> global;
    for (const auto& [key, w] : paramWish_) {
      const auto& [device, module, name, at] = key;
      global[{module, std::string(name), at}].byDevice.emplace_back(std::string(device), &w);
    }
    for (const auto& [key, wanted] : global) {
      const auto& [module, name, at] = key;
      const ParamWish& first = *wanted.byDevice.front().second;
      const ChangeKind kind = at == ParamSetting::At::Load ? ChangeKind::ModprobeConf : ChangeKind::ModuleParam;
      const std::string object = module + "." + name;
      const std::string& lead = wanted.byDevice.front().first;
      bool conflict = false;
      for (const auto& [dev, w] : wanted.byDevice) {
        if (!sameValue(w->param->value, first.param->value)) {
          skip(kind, dev, object, name, w->param->value, *w->rule, SkipReason::Conflict,
               "rules disagree on " + object + ": '" + first.rule->name + "' wants " + first.param->value + ", '" +
                   w->rule->name + "' wants " + w->param->value);
          conflict = true;
        }
      }
      if (conflict) {
        skip(kind, lead, object, name, first.param->value, *first.rule, SkipReason::Conflict,
             "rules disagree on " + object + "; nothing is set");
        continue;
      }
      std::vector<std::string> devices;
      for (const auto& bd : wanted.byDevice) devices.push_back(bd.first);
      planParam(first, lead, devices, module, name, at);
    }
  }

  void planParam(const ParamWish& w, const std::string& lead, const std::vector<std::string>& devices,
                 const std::string& module, const std::string& name, ParamSetting::At at) {
    const ParamSetting& p = *w.param;
    const Rule& r = *w.rule;
    const bool load = at == ParamSetting::At::Load;
    const ChangeKind kind = load ? ChangeKind::ModprobeConf : ChangeKind::ModuleParam;
    const std::string object = load ? std::string(kModprobePrefix) + module + ".conf" : module + "." + name;
    auto mit = in_.host.modules.find(module);
    const Module* m = mit == in_.host.modules.end() ? nullptr : &mit->second;
    const ModuleParam* cur = nullptr;
    if (m != nullptr) {
      if (auto pit = m->params.find(name); pit != m->params.end()) cur = &pit->second;
    }
    auto missing = [&](const std::string& message) {
      if (!p.optional) skip(kind, lead, object, name, p.value, r, SkipReason::ParamMissing, message);
    };
    Change ch;
    ch.kind = kind;
    ch.device = lead;
    ch.devices = devices;
    ch.object = object;
    ch.key = name;
    ch.to = p.value;
    ch.rule = refOf(r);
    ch.mode = modeOf(r);
    ch.tradeOff = "does not change DMA isolation";
    if (load) {
      // The initramfs's /etc is thrown away at switch_root: the daemon writes the file at start
      // (not disruptive, so a boot rule's line is allowed then).
      if (options_.trigger == Trigger::Boot) return;
      if (m != nullptr && m->builtin) {
        skip(kind, lead, object, name, p.value, r, SkipReason::Unsupported,
             module + " is built into the kernel: modprobe.d has no effect; put " + module + "." + name + "=" +
                 p.value + " on the kernel command line instead");
        return;
      }
      if (m != nullptr && lacksParam(*m, name)) {
        missing("module " + module + " has no parameter " + name);
        return;
      }
      std::optional<std::string> inFile;
      if (m != nullptr) {
        if (auto opt = m->iommudOptions.find(name); opt != m->iommudOptions.end()) inFile = opt->second;
      }
      if (inFile && sameValue(*inFile, p.value)) {
        plan_.satisfied.push_back(Satisfied{kind, lead, object, name, p.value, refOf(r)});
        return;
      }
      ch.from = inFile.value_or("(not set)");
      noteLoadTime(ch, in_.host);
      plan_.changes.push_back(std::move(ch));
      return;
    }
    if (m == nullptr || !m->loaded) {
      missing("module " + module + " is not loaded");
      return;
    }
    if (cur == nullptr) {
      missing("module " + module + " has no parameter " + name + " (or does not show it in /sys/module)");
      return;
    }
    if (!cur->writable) {
      skip(kind, lead, object, name, p.value, r, SkipReason::ParamReadOnly,
           object + " is read-only at runtime; use at = \"load\" to set it in modprobe.d");
      return;
    }
    if (sameValue(cur->value, p.value)) {
      plan_.satisfied.push_back(Satisfied{kind, lead, object, name, p.value, refOf(r)});
      return;
    }
    if (!allowedNow(r, false)) {
      skip(kind, lead, object, name, p.value, r, SkipReason::HotplugOnly, hotplugOnlyMessage(r, "the rule"));
      return;
    }
    ch.from = cur->value;
    if (p.takesEffect == ParamSetting::TakesEffect::Probe) {
      ch.note = module + " reads it only when it binds a device: it takes effect after a rebind or reload";
    }
    plan_.changes.push_back(std::move(ch));
  }

  void finish() {
    // A device's rank is its place in the host's (address-ordered) list.
    auto rank = [&](const std::string& address) {
      const PciDevice* d = in_.host.device(address);
      return d == nullptr ? SIZE_MAX : static_cast<size_t>(d - in_.host.devices.data());
    };
    sortByDevice(plan_.changes, rank);
    sortByDevice(plan_.skips, rank);
    sortByDevice(plan_.satisfied, rank);
    if (options_.device) filterTo(*options_.device);
    plan_.trigger = options_.trigger;
  }

  // Orders by device (in address order), then kind, object and key; ranks are looked up once per
  // element, not once per comparison.
  template <class T, class Rank>
  static void sortByDevice(std::vector<T>& items, Rank&& rank) {
    std::vector<std::pair<size_t, size_t>> order;  // (rank, index)
    order.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      order.emplace_back(rank(items[i].device), i);
    }
    auto key = [&](const std::pair<size_t, size_t>& o) {
      const T& x = items[o.second];
      return std::tuple<size_t, ChangeKind, const std::string&, const std::string&>{o.first, x.kind, x.object, x.key};
    };
    std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
    std::vector<T> sorted;
    sorted.reserve(items.size());
    for (const auto& o : order) sorted.push_back(std::move(items[o.second]));
    items = std::move(sorted);
  }

  // Keeps what concerns one device: its own settings, its group's type, its module's parameters.
  void filterTo(const std::string& address) {
    const PciDevice* d = in_.host.device(address);
    auto concerns = [&](const std::string& device, const std::vector<std::string>* devices, std::optional<int> group) {
      if (device == address) return true;
      if (devices != nullptr && contains(*devices, address)) return true;
      return d != nullptr && group && d->group == group;
    };
    std::erase_if(plan_.changes, [&](const Change& c) { return !concerns(c.device, &c.devices, c.group); });
    auto groupOf = [&](const std::string& device) -> std::optional<int> {
      const PciDevice* x = in_.host.device(device);
      return x != nullptr ? x->group : std::nullopt;
    };
    std::erase_if(plan_.skips, [&](const Skip& s) {
      return !concerns(s.device, nullptr, s.kind == ChangeKind::Domain ? groupOf(s.device) : std::nullopt);
    });
    std::erase_if(plan_.satisfied, [&](const Satisfied& s) {
      return !concerns(s.device, nullptr, s.kind == ChangeKind::Domain ? groupOf(s.device) : std::nullopt);
    });
  }

  const PlanInput& in_;
  const PolicySet& policies_;
  const PlanOptions& options_;
  HostCtx host_;
  std::vector<GroupCtx> groups_;
  std::vector<std::pair<int, size_t>> groupIndex_;  // group id -> groups_ index, by id
  std::vector<DeviceCtx> devices_;
  // Keys view strings of the host and the rules, which outlive the planner.
  std::map<std::tuple<std::string_view, std::string, std::string_view, ParamSetting::At>, ParamWish> paramWish_;
  Plan plan_;
};

}  // namespace

Plan plan(const PlanInput& in, const PolicySet& policies, const PlanOptions& options) {
  return Planner(in, policies, options).run();
}

bool writesModprobeD(const Plan& plan) {
  return std::any_of(plan.changes.begin(), plan.changes.end(),
                     [](const Change& c) { return c.kind == ChangeKind::ModprobeConf; });
}

void noteInitramfs(Plan& plan, const HostFacts& host) {
  for (auto& c : plan.changes) {
    if (c.kind == ChangeKind::ModprobeConf) noteLoadTime(c, host);
  }
}

std::vector<RuleEvaluation> evaluateRules(const PlanInput& in, const PolicySet& policies, const PciDevice& device) {
  HostCtx h = hostContext(in);
  std::optional<GroupCtx> g;
  if (device.group) {
    if (const Group* grp = in.host.group(*device.group)) {
      g = groupContext(*grp, [&](const std::string& a) { return in.host.device(a); });
    }
  }
  DeviceCtx c = deviceContext(device, g ? &*g : nullptr);
  std::vector<RuleEvaluation> out;
  for (const auto& r : policies.rules) {
    RuleEvaluation ev;
    ev.rule = &r;
    Eval<true> e(&ev.conditions);
    matchRule(r, h, c, e);
    ev.matches = e.all() && r.enabled;
    out.push_back(std::move(ev));
  }
  return out;
}

}  // namespace iommud::core
