#include "core/plan.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/plan/context.hpp"
#include "core/plan/device_index.hpp"
#include "core/plan/domain_decision.hpp"
#include "core/plan/module_params.hpp"
#include "core/plan/nic_settings.hpp"
#include "core/plan/recorder.hpp"
#include "core/plan/rule_match.hpp"

namespace iommud::core {

std::string_view toString(Trigger t) {
  return nameOf(kTriggerNames, t);
}

std::string_view toString(ChangeKind k) {
  return nameOf(kChangeKindNames, k);
}

std::optional<ChangeKind> parseChangeKind(std::string_view name) {
  return valueNamed(kChangeKindNames, name);
}

std::string_view toString(SkipReason r) {
  return nameOf(kSkipReasonNames, r);
}

namespace planning {

namespace {

// The planner's state for one run.
class Planner {
 public:
  Planner(const PlanInput& in, const PolicySet& policies, const PlanOptions& options)
      : in_(in), policies_(policies), options_(options), host_(hostContext(in)), out_{options, {}} {}

  Plan run() {
    buildContexts();
    // Most devices end in a change, a skip or a satisfied setting: grow once, not log n times.
    out_.plan.changes.reserve(devices_.size());
    out_.plan.skips.reserve(devices_.size());
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
    planDomains(in_, devices_, out_);
    planNicSettings(host_, devices_, out_);
    params_.plan(in_, out_);
    finish();
    return std::move(out_.plan);
  }

 private:
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
    out_.skip(kind, c.dev->address, std::string(object), std::string(keyName), wanted(old), old, SkipReason::Overridden,
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
      params_.collect(c, r, out_);
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
    params_.collect(c, r, out_);
  }

  std::string groupName(const DeviceCtx& c) const {
    return c.dev->group ? "group " + std::to_string(*c.dev->group) : "(no group)";
  }

  void finish() {
    // A device's rank is its place in the host's (address-ordered) list.
    auto rank = [&](const std::string& address) {
      const PciDevice* d = in_.host.device(address);
      return d == nullptr ? SIZE_MAX : static_cast<size_t>(d - in_.host.devices.data());
    };
    sortByDevice(out_.plan.changes, rank);
    sortByDevice(out_.plan.skips, rank);
    sortByDevice(out_.plan.satisfied, rank);
    if (options_.device) filterTo(*options_.device);
    out_.plan.trigger = options_.trigger;
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
    std::erase_if(out_.plan.changes, [&](const Change& c) { return !concerns(c.device, &c.devices, c.group); });
    auto groupOf = [&](const std::string& device) -> std::optional<int> {
      const PciDevice* x = in_.host.device(device);
      return x != nullptr ? x->group : std::nullopt;
    };
    std::erase_if(out_.plan.skips, [&](const Skip& s) {
      return !concerns(s.device, nullptr, s.kind == ChangeKind::Domain ? groupOf(s.device) : std::nullopt);
    });
    std::erase_if(out_.plan.satisfied, [&](const Satisfied& s) {
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
  ParamWishes params_;
  Recorder out_;
};

}  // namespace

}  // namespace planning

Plan plan(const PlanInput& in, const PolicySet& policies, const PlanOptions& options) {
  return planning::Planner(in, policies, options).run();
}

bool writesModprobeD(const Plan& plan) {
  return std::any_of(plan.changes.begin(), plan.changes.end(),
                     [](const Change& c) { return c.kind == ChangeKind::ModprobeConf; });
}

void noteInitramfs(Plan& plan, const HostFacts& host) {
  for (auto& c : plan.changes) {
    if (c.kind == ChangeKind::ModprobeConf) planning::noteLoadTime(c, host);
  }
}

std::vector<RuleEvaluation> evaluateRules(const PlanInput& in, const PolicySet& policies, const PciDevice& device) {
  using namespace planning;  // the parts of the planner
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