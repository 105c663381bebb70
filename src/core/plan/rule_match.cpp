#include "core/plan/rule_match.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace iommud::core::planning {

namespace {

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

std::string listOrOne(const std::string& body, size_t n) {
  return n == 1 ? body : "[" + body + "]";
}

// The device conditions of one [rule.match] or [[rule.unless]] entry, in the order explain lists
// them; globs last: the cheap comparisons rule most devices out first.
template <bool Collect>
class DeviceConditions {
 public:
  DeviceConditions(const DeviceMatch& m, const DeviceCtx& c, Eval<Collect>& e, const char* prefix)
      : m_(m), c_(c), d_(*c.dev), e_(e), prefix_(prefix) {}

  bool hold() { return ids() && flags() && group() && globs(); }

 private:
  using P = std::pair<std::string, std::string>;

  static std::string quoted(const std::string& s) { return "\"" + s + "\""; }
  static std::string kindName(DeviceKind k) { return quoted(std::string(toString(k))); }

  bool id(const char* key, const std::vector<uint16_t>& want, uint16_t have) {
    return want.empty() || e_(contains(want, have), [&] {
             return P{prefix_ + key + " = " + listOrOne(joined(want, hex4), want.size()), hex4(have)};
           });
  }

  bool flag(const char* key, const std::optional<bool>& want, bool have) {
    return !want || e_(*want == have, [&] {
      return P{prefix_ + key + " = " + (*want ? "true" : "false"), have ? "true" : "false"};
    });
  }

  bool ids() {
    const auto& m = m_;
    if (!m.kinds.empty() && !e_(contains(m.kinds, c_.kind), [&] {
          return P{prefix_ + "kind = " + listOrOne(joined(m.kinds, kindName), m.kinds.size()),
                   std::string(toString(c_.kind))};
        })) {
      return false;
    }
    if (!id("vendor", m.vendor, d_.vendorId) || !id("device", m.device, d_.deviceId) ||
        !id("subsystem-vendor", m.subsystemVendor, d_.subsystemVendorId) ||
        !id("subsystem-device", m.subsystemDevice, d_.subsystemDeviceId)) {
      return false;
    }
    return m.classes.empty() ||
           e_(std::any_of(m.classes.begin(), m.classes.end(),
                          [&](const ClassPattern& p) { return p.matches(d_.classCode); }),
              [&] {
                auto pattern = [](const ClassPattern& p) {
                  return quoted(hex6(p.value).substr(static_cast<size_t>(6 - p.digits)));
                };
                return P{prefix_ + "class = " + listOrOne(joined(m.classes, pattern), m.classes.size()),
                         hex6(d_.classCode)};
              });
  }

  bool flags() {
    return flag("removable", m_.removable, d_.removable == Removable::Removable) &&
           flag("thunderbolt", m_.thunderbolt, d_.thunderbolt) && flag("untrusted", m_.untrusted, d_.untrusted()) &&
           flag("in-use", m_.inUse, !d_.inUse.empty());
  }

  bool group() {
    const auto& m = m_;
    if (m.groupSize && !e_(m.groupSize->contains(c_.groupSize), [&] {
          return P{prefix_ + "group-size = " + m.groupSize->str(), std::to_string(c_.groupSize)};
        })) {
      return false;
    }
    if (!flag("shares-group", m.sharesGroup, c_.groupSize > 1)) return false;
    if (m.sharesGroupWith.empty()) return true;
    unsigned want = 0;
    for (auto k : m.sharesGroupWith) want |= kindBit(k);
    return e_((c_.otherKinds & want) != 0, [&] {
      std::vector<std::string> others;
      for (auto k : {DeviceKind::Nic, DeviceKind::Nvme, DeviceKind::Bridge, DeviceKind::Other}) {
        if ((c_.otherKinds & kindBit(k)) != 0) others.emplace_back(toString(k));
      }
      return P{
          prefix_ + "shares-group-with = " + listOrOne(joined(m.sharesGroupWith, kindName), m.sharesGroupWith.size()),
          others.empty() ? "(alone)" : joined(others, [](const std::string& s) { return s; })};
    });
  }

  bool glob(const char* key, const std::vector<Glob>& pats, std::span<const std::string_view> names) {
    if (pats.empty()) return true;
    bool hit = std::any_of(pats.begin(), pats.end(), [&](const Glob& p) {
      return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return p.matches(n); });
    });
    return e_(hit, [&] {
      return P{
          prefix_ + key + " = " + listOrOne(joined(pats, [&](const Glob& g) { return quoted(g.str()); }), pats.size()),
          names.empty() ? "(none)" : joined(names, [](std::string_view n) { return std::string(n); })};
    });
  }

  bool globs() {
    return glob("address", m_.addresses, c_.address()) && glob("driver", m_.drivers, c_.driver()) &&
           glob("name", m_.names, c_.names);
  }

  const DeviceMatch& m_;
  const DeviceCtx& c_;
  const PciDevice& d_;
  Eval<Collect>& e_;
  std::string prefix_;
};

using ExpectedActual = std::pair<std::string, std::string>;

// The host's IOMMU, its default mode, the VT-d capability flags and the kernel's version.
template <bool Collect>
bool matchPlatform(const HostMatch& m, const HostCtx& h, Eval<Collect>& e) {
  using P = ExpectedActual;
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
  return !m.kernel || e(h.version && m.kernel->contains(*h.version), [&] {
    return P{"host.kernel = \"" + m.kernelText + "\"", h.version ? h.version->str() : "unknown"};
  });
}

// Parameters the kernel's command line must have, and those it must not.
template <bool Collect>
bool matchCmdline(const HostMatch& m, const HostCtx& h, Eval<Collect>& e) {
  using P = ExpectedActual;
  auto has = [&](const std::string& p) {
    return p.find('=') == std::string::npos ? h.cmdlineKeys.contains(p) : h.cmdlineParams.contains(p);
  };
  for (const auto& p : m.cmdline) {
    bool present = has(p);
    if (!e(present, [&] { return P{"host.cmdline has \"" + p + "\"", present ? "present" : "absent"}; })) return false;
  }
  for (const auto& p : m.cmdlineAbsent) {
    bool present = has(p);
    if (!e(!present, [&] { return P{"host.cmdline-absent has \"" + p + "\"", present ? "present" : "absent"}; }))
      return false;
  }
  return true;
}

// Findings hold for the whole host, or for the devices and groups they name.
template <bool Collect>
bool matchFindings(const HostMatch& m, const HostCtx& h, Eval<Collect>& e, const DeviceCtx* c) {
  for (const auto& id : m.findings) {
    auto it = h.findings.find(id);
    bool hit = false;
    if (it != h.findings.end()) {
      const auto& s = it->second;
      hit = s.hostWide || c == nullptr || s.devices.contains(c->dev->address) ||
            (c->dev->group && s.groups.contains(*c->dev->group));
    }
    if (!e(hit, [&] {
          return ExpectedActual{"host.finding = \"" + id + "\"", it == h.findings.end() ? "not present"
                                                                 : hit                  ? "present"
                                                                       : "present, not for this device"};
        })) {
      return false;
    }
  }
  return true;
}

}  // namespace

template <bool Collect>
bool matchDevice(const DeviceMatch& m, const DeviceCtx& c, Eval<Collect>& e, const char* prefix) {
  return DeviceConditions<Collect>(m, c, e, prefix).hold();
}

template <bool Collect>
bool matchHost(const HostMatch& m, const HostCtx& h, Eval<Collect>& e, const DeviceCtx* c) {
  return matchPlatform(m, h, e) && matchCmdline(m, h, e) && matchFindings(m, h, e, c);
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
template bool matchHost<false>(const HostMatch&, const HostCtx&, Eval<false>&, const DeviceCtx*);
template bool matchRule<false>(const Rule&, const HostCtx&, const DeviceCtx&, Eval<false>&);
template bool matchRule<true>(const Rule&, const HostCtx&, const DeviceCtx&, Eval<true>&);

}  // namespace iommud::core::planning
