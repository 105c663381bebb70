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
        out_.skip(ChangeKind::Domain, lead, object, "type", std::string(toString(*r->domain)), *r, reason, message);
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
      out_.plan.satisfied.push_back(Satisfied{ChangeKind::Domain, lead, object, "type", targetName, refOf(rule)});
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
      if (out_.modeOf(*r) != RuleMode::Apply) continue;
      auto need = acceptanceFor(*target);
      if (need && !r->accepted(*need)) {
        out_.skip(ChangeKind::Domain, lead, object, "type", targetName, *r, SkipReason::NeedsAcceptance,
                  "rule '" + r->name + "' asks for " + targetName + " but does not accept the trade-off: " + tradeOff +
                      ". " + howToAccept(*need));
        return;
      }
    }
    const bool advise =
        std::any_of(rules.begin(), rules.end(), [&](const Rule* r) { return out_.modeOf(*r) == RuleMode::Advise; });
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
        if (!out_.allowedNow(*r, true)) {
          refuse(SkipReason::HotplugOnly,
                 Recorder::hotplugOnlyMessage(*r, "changing " + object + " rebinds its drivers; it"));
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
    out_.plan.changes.push_back(std::move(ch));
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

void planDomains(const PlanInput& in, const std::vector<DeviceCtx>& devices, Recorder& out) {
  DomainPlanner(in, devices, out).run();
}

}  // namespace iommud::core::planning
