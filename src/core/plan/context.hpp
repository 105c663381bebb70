#pragma once

// What the planner knows of the host, a group and a device, gathered once per plan: the parts of
// the planner (rule_match, domain_decision, nic_settings, module_params) read it.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/plan.hpp"

namespace iommud::core::planning {

inline unsigned kindBit(DeviceKind k) {
  return 1U << static_cast<unsigned>(k);
}

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
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

HostCtx hostContext(const PlanInput& in);

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

DeviceCtx deviceContext(const PciDevice& d, const GroupCtx* g);

}  // namespace iommud::core::planning
