#include "core/plan/domain_decision.hpp"

#include <algorithm>
#include <map>

#include "core/domain_safety.hpp"
#include "core/policy_lint.hpp"

namespace iommud::core::planning {

namespace {

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

class DomainPlanner {
 public:
  DomainPlanner(const PlanInput& in, const std::vector<DeviceCtx>& devices, Recorder& out)
      : in_(in), devices_(devices), out_(out) {}

  void run() {
    // Group by IOMMU group, in the order of the groups' first endpoint.
    std::map<int, std::vector<const DeviceCtx*>> wishing;
    for (const auto& c : devices_) {
      if (c.domainRule == nullptr) continue;
      if (c.group == nullptr) {
        const Rule& w = *c.domainRule;
        out_.skip(ChangeKind::Domain, c.dev->address, "(no group)", "type", std::string(toString(*w.domain)), w,
                  SkipReason::NoIommu, c.dev->displayName() + " is not behind an IOMMU: it has no group to set");
        continue;
      }
      wishing[c.group->group->id].push_back(&c);
    }
    for (const auto& [id, wishers] : wishing) planGroup(*wishers.front()->group, wishers);
  }

 private:
  // One group's wish: the rules its endpoints' wishes come from (in device order, once each).
  struct GroupWish {
    const GroupCtx& g;
    std::string object;  // "group 14"
    std::string lead;    // the device the plan names it by
    std::vector<const Rule*> rules;
  };

  void planGroup(const GroupCtx& g, const std::vector<const DeviceCtx*>& wishers) {
    const GroupWish w = wishOf(g, wishers);
    if (!covered(w) || !agreed(w)) return;
    const Group& group = *g.group;
    const Rule& rule = *w.rules.front();
    bool untrusted =
        std::any_of(g.endpoints.begin(), g.endpoints.end(), [](const PciDevice* d) { return d->untrusted(); });
    auto target = resolveRequest(*rule.domain, in_.mode, untrusted);
    if (!target) {
      refuse(w, SkipReason::Unsupported,
             w.object + " has no default domain the kernel lets iommud change (type reads \"" + group.typeText + "\")");
      return;
    }
    if (group.type == target) {
      out_.plan.satisfied.push_back(
          Satisfied{ChangeKind::Domain, w.lead, w.object, "type", std::string(toString(*target)), refOf(rule)});
      return;
    }
    // The safety rules and the kernel's, judged once for the planner and the transaction alike
    // (core/domain_safety); being in use comes last, after the trade-off is accepted.
    const auto safety = judgeDomainChange(in_.host, group, *target);
    const bool inUse = safety.refusal == DomainRefusal::InUse || safety.refusal == DomainRefusal::NeverUnbind;
    if (!safety.allowed() && !inUse) {
      refuse(w, skipReasonOf(*safety.refusal), safety.message);
      return;
    }
    const TradeOff tradeOff = tradeOffOf(*target, w.object, deviceList(g));
    if (!accepted(w, *target, tradeOff)) return;
    const bool advise =
        std::any_of(w.rules.begin(), w.rules.end(), [&](const Rule* r) { return out_.modeOf(*r) == RuleMode::Advise; });
    auto note = whenItActs(w, safety, inUse, advise);
    if (!note) return;
    Change ch = changeOf(w, *target, advise, safety.way.verdict.live);
    ch.risk = tradeOff.risk;
    ch.tradeOff = tradeOff.text;
    ch.note = *note;
    out_.plan.changes.push_back(std::move(ch));
  }

  GroupWish wishOf(const GroupCtx& g, const std::vector<const DeviceCtx*>& wishers) const {
    GroupWish w{g,
                "group " + std::to_string(g.group->id),
                g.endpoints.empty() ? wishers.front()->dev->address : g.endpoints.front()->address,
                {}};
    for (const auto* c : wishers) {
      if (!contains(w.rules, c->domainRule)) w.rules.push_back(c->domainRule);
    }
    return w;
  }

  void refuse(const GroupWish& w, SkipReason reason, const std::string& message) {
    for (const Rule* r : w.rules) {
      out_.skip(ChangeKind::Domain, w.lead, w.object, "type", std::string(toString(*r->domain)), *r, reason, message);
    }
  }

  // The type belongs to the group: every endpoint must be covered by a rule ...
  bool covered(const GroupWish& w) {
    const auto& eps = w.g.endpoints;
    auto ep =
        std::find_if(eps.begin(), eps.end(), [&](const PciDevice* d) { return contextOf(*d).domainRule == nullptr; });
    if (ep == eps.end()) return true;
    refuse(w, SkipReason::GroupUncovered,
           w.object + " also holds " + (*ep)->displayName() + " (" + (*ep)->address +
               "), which no rule covers; a domain type is set for the whole group");
    return false;
  }

  // ... and every rule want the same.
  bool agreed(const GroupWish& w) {
    const Rule& rule = *w.rules.front();
    auto r = std::find_if(w.rules.begin(), w.rules.end(), [&](const Rule* o) { return *o->domain != *rule.domain; });
    if (r == w.rules.end()) return true;
    refuse(w, SkipReason::Conflict,
           "rules disagree on " + w.object + ": '" + rule.name + "' wants " + std::string(toString(*rule.domain)) +
               ", '" + (*r)->name + "' wants " + std::string(toString(*(*r)->domain)));
    return false;
  }

  // Whether every rule that applies accepts the trade-off (advice needs no acceptance).
  bool accepted(const GroupWish& w, DomainType target, const TradeOff& tradeOff) {
    const std::string targetName(toString(target));
    for (const Rule* r : w.rules) {
      if (out_.modeOf(*r) != RuleMode::Apply) continue;
      auto need = acceptanceFor(target);
      if (need && !r->accepted(*need)) {
        out_.skip(ChangeKind::Domain, w.lead, w.object, "type", targetName, *r, SkipReason::NeedsAcceptance,
                  "rule '" + r->name + "' asks for " + targetName +
                      " but does not accept the trade-off: " + tradeOff.text + ". " + howToAccept(*need));
        return false;
      }
    }
    return true;
  }

  // The change's note when it may act now, or nullopt (refused): a rebind waits for a moment
  // nothing holds the devices; a live change cannot be undone.
  std::optional<std::string> whenItActs(const GroupWish& w, const DomainSafety& safety, bool inUse, bool advise) {
    if (safety.way.verdict.live) {
      return "DMA -> DMA-FQ is done with drivers bound and cannot be undone until the devices are unbound or the "
             "machine reboots";
    }
    std::string note;
    if (inUse && advise) {
      note = "a rebind is needed and " + inUseWhy(*safety.device) +
             "; apply it where nothing holds the device yet (at boot)";
    } else if (inUse) {
      refuse(w, skipReasonOf(*safety.refusal), safety.message);
      return std::nullopt;
    }
    for (const Rule* r : w.rules) {
      if (!out_.allowedNow(*r, true)) {
        refuse(w, SkipReason::HotplugOnly,
               Recorder::hotplugOnlyMessage(*r, "changing " + w.object + " rebinds its drivers; it"));
        return std::nullopt;
      }
    }
    return note;
  }

  static Change changeOf(const GroupWish& w, DomainType target, bool advise, bool live) {
    const Group& group = *w.g.group;
    Change ch;
    ch.kind = ChangeKind::Domain;
    ch.device = w.lead;
    for (const auto* ep : w.g.endpoints) ch.devices.push_back(ep->address);
    ch.group = group.id;
    ch.object = w.object;
    ch.key = "type";
    ch.from = std::string(toString(*group.type));
    ch.to = std::string(toString(target));
    ch.rule = refOf(*w.rules.front());
    ch.mode = advise ? RuleMode::Advise : RuleMode::Apply;
    ch.disruptive = !live;
    ch.irreversible = live;
    return ch;
  }

  // devices_ runs parallel to the host's devices.
  const DeviceCtx& contextOf(const PciDevice& d) const {
    return devices_[static_cast<size_t>(&d - in_.host.devices.data())];
  }

  const PlanInput& in_;
  const std::vector<DeviceCtx>& devices_;
  Recorder& out_;
};

}  // namespace

TradeOff tradeOffOf(DomainType target, const std::string& object, const std::string& devices) {
  const std::string head = object + " (" + devices + ") set to ";
  if (target == DomainType::Identity) {
    return {Risk::High, head +
                            "identity: these devices can DMA to all memory; a faulty or compromised device or its "
                            "firmware is no longer contained"};
  }
  if (target == DomainType::DmaFq) {
    return {Risk::Medium, head +
                              "DMA-FQ: unmapped buffers stay reachable by these devices until the next batched IOTLB "
                              "flush (about 10 ms)"};
  }
  return {Risk::None,
          head + std::string(toString(target)) +
              ": strict translation, each device reaches only the buffers mapped for it; protection gained"};
}

void planDomains(const PlanInput& in, const std::vector<DeviceCtx>& devices, Recorder& out) {
  DomainPlanner(in, devices, out).run();
}

}  // namespace iommud::core::planning
