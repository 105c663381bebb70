#include "core/plan/rule_match.hpp"

#include <cstdint>

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

}  // namespace

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
template bool matchHost<false>(const HostMatch&, const HostCtx&, Eval<false>&, const DeviceCtx*);
template bool matchRule<false>(const Rule&, const HostCtx&, const DeviceCtx&, Eval<false>&);
template bool matchRule<true>(const Rule&, const HostCtx&, const DeviceCtx&, Eval<true>&);

}  // namespace iommud::core::planning
