#include "app/change/reconcile.hpp"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <tuple>

#include "adapters/sysfs/host_reader.hpp"
#include "app/change/planning.hpp"
#include "app/change/record_store.hpp"

namespace iommud::app {

core::Result<WriterSession> beginWriting(ApplyContext& ctx, const LockWait& wait) {
  if (auto made = adapters::state::makeDirectories(ctx.root.hostPath(ctx.paths.runDir)); !made) return made.error();
  const std::string path = ctx.root.hostPath(ctx.paths.runDir + "/lock");
  auto lock = wait.bound.count() > 0 ? adapters::state::WriterLock::acquireWithin(path, wait.bound, wait.waiting)
                                     : adapters::state::WriterLock::acquire(path, false);
  if (!lock) return lock.error();
  adapters::state::Journal journal(ctx.root.hostPath(ctx.paths.runDir + "/transaction.journal"));
  return WriterSession{std::move(lock).value(), recoverDomainChanges(ctx.root, ctx.writer, journal, ::time(nullptr)),
                       readRecordsView(ctx.root, ctx.paths).damage};
}

std::string WriterSession::degraded() const {
  std::string out = recovered.degraded();
  if (!damage.empty()) {
    out += (out.empty() ? "" : "; ") + core::describeDamage(damage) +
           ": no change that weakens protection is made until it is dealt with (iommuctl status)";
  }
  return out;
}

core::Result<HostView> readHostView(const adapters::sysfs::Root& root, const core::PolicySet& policies,
                                    adapters::sysfs::BootFacts* boot) {
  auto host = adapters::sysfs::readHost(root, boot);
  if (!host) return core::Error{host.error().code, "", "cannot read the host: " + host.error().describe()};
  readPolicyModules(root, policies, *host);
  HostView view;
  // The ethtool family is resolved only where there is an interface to read: on a host without
  // one it would cost a netlink socket and four round trips at every read (every hotplug batch).
  const bool interfaces = std::any_of(host->devices.begin(), host->devices.end(), [](const core::PciDevice& d) {
    return std::any_of(d.netdevs.begin(), d.netdevs.end(), [](const core::NetDev& n) { return n.ifindex > 0; });
  });
  if (root.isLive() && interfaces) {
    auto opened = NetlinkEthtool::open(host->kernel.upstream.version);
    if (opened) {
      view.ethtool = std::move(opened).value();
      view.ethtool->readAll(*host);
    } else {
      view.ethtoolError = opened.error().describe();
    }
  }
  view.status = buildStatus(std::move(host).value());
  return view;
}

namespace {

// Merges the plans of several devices: a group's change appears in the plan of each of its
// devices, and must be made once.
void merge(core::Plan& into, core::Plan&& from) {
  auto changeKey = [](const core::Change& c) { return std::tie(c.kind, c.object, c.key); };
  for (auto& c : from.changes) {
    if (std::none_of(into.changes.begin(), into.changes.end(),
                     [&](const core::Change& x) { return changeKey(x) == changeKey(c); })) {
      into.changes.push_back(std::move(c));
    }
  }
  auto key = [](const auto& s) { return std::tie(s.kind, s.device, s.object, s.key); };
  for (auto& s : from.skips) {
    if (std::none_of(into.skips.begin(), into.skips.end(), [&](const core::Skip& x) { return key(x) == key(s); })) {
      into.skips.push_back(std::move(s));
    }
  }
  for (auto& s : from.satisfied) {
    if (std::none_of(into.satisfied.begin(), into.satisfied.end(),
                     [&](const core::Satisfied& x) { return key(x) == key(s); })) {
      into.satisfied.push_back(std::move(s));
    }
  }
}

// The request's devices on this read of the host, by address, each planned with its trigger and
// the plans merged; names not on the host in `absent`.
core::Plan planFor(const HostView& view, const core::PolicySet& policies, const ReconcileRequest& request,
                   Reconciled* names) {
  core::PlanOptions po;
  po.trigger = request.trigger;
  po.adviseOnly = request.adviseOnly;
  const core::PlanInput in{view.status.host, view.status.mode, view.status.findings};
  if (request.devices.empty() && request.cold.empty()) return core::plan(in, policies, po);
  core::Plan merged;
  merged.trigger = request.trigger;
  auto some = [&](const std::vector<std::string>& devices, core::Trigger trigger, std::vector<std::string>* decided) {
    po.trigger = trigger;
    for (const auto& name : devices) {
      const auto* d = findDevice(view.status.host, name);
      if (d == nullptr) {
        if (names != nullptr) names->absent.push_back(name);
        continue;
      }
      if (names != nullptr) decided->push_back(d->address);
      po.device = d->address;
      merge(merged, core::plan(in, policies, po));
    }
  };
  some(request.devices, request.trigger, names != nullptr ? &names->decided : nullptr);
  some(request.cold, core::Trigger::Coldplug, names != nullptr ? &names->decidedCold : nullptr);
  return merged;
}

Outcome skipped(const core::Skip& sk) {
  Outcome o{Outcome::Result::Skipped,
            sk.kind,
            sk.device,
            sk.object,
            sk.key,
            sk.object + " " + sk.key + " " + sk.wanted + " (rule " + sk.rule.name + "): " + sk.message};
  o.group = std::nullopt;
  o.rule = sk.rule.name;
  o.ruleWhere = sk.rule.where.str();
  o.to = sk.wanted;
  o.skip = sk.reason;
  return o;
}

}  // namespace

core::Result<Reconciled> reconcile(const core::PolicySet& policies, const ReconcileRequest& request,
                                   ApplyContext& ctx) {
  Reconciled out;
  for (int round = 0; round < 2; ++round) {
    auto view = readHostView(ctx.root, policies, ctx.boot);
    if (!view) return view.error();
    auto plan = planFor(*view, policies, request, round == 0 ? &out : nullptr);
    listInitramfsFor(ctx.root, plan, view->status);
    ctx.ethtool = view->ethtool.get();
    auto outcomes = applyPlan(plan, view->status.host, ctx);
    ctx.ethtool = nullptr;
    if (round == 0) {
      for (const auto& sk : plan.skips) out.outcomes.push_back(skipped(sk));
      out.satisfied = std::move(plan.satisfied);
      out.host = view->status.host;
    }
    const bool changed = std::any_of(outcomes.begin(), outcomes.end(), [](const Outcome& o) {
      return o.result == Outcome::Result::Done || o.result == Outcome::Result::Failed;
    });
    out.unchanged.reset();
    if (!changed) out.unchanged = std::move(view->status);
    bool again = std::any_of(outcomes.begin(), outcomes.end(),
                             [](const Outcome& o) { return o.result == Outcome::Result::Kept && o.nextRound; });
    for (auto& o : outcomes) {
      if (!(again && o.result == Outcome::Result::Kept)) out.outcomes.push_back(std::move(o));
    }
    if (!again) break;
  }
  return out;
}

core::Result<Reverted> revertNamed(const std::string& name, ApplyContext& ctx, const std::string& keptFile) {
  auto host = adapters::sysfs::readHost(ctx.root, ctx.boot);
  if (!host) return core::Error{host.error().code, "", "cannot read the host: " + host.error().describe()};
  std::optional<std::string> only;
  if (!name.empty()) {
    const auto* d = findDevice(*host, name);
    if (d == nullptr) return core::Error{ENODEV, "", "no device " + name + " on this host"};
    only = d->address;
  }
  auto ethtool = NetlinkEthtool::open(host->kernel.upstream.version);
  ctx.ethtool = ethtool ? ethtool->get() : nullptr;
  Reverted out;
  out.outcomes = revertChanges(only, *host, ctx, keptFile);
  ctx.ethtool = nullptr;
  out.host = std::move(host).value();
  return out;
}

}  // namespace iommud::app
