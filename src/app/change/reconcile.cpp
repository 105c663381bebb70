#include "app/change/reconcile.hpp"

#include <algorithm>
#include <ctime>
#include <tuple>

#include "adapters/sysfs/host_reader.hpp"
#include "app/change/planning.hpp"

namespace iommud::app {

core::Result<WriterSession> beginWriting(ApplyContext& ctx) {
  if (auto made = adapters::state::makeDirectories(ctx.root.hostPath(ctx.paths.runDir)); !made) return made.error();
  auto lock = adapters::state::WriterLock::acquire(ctx.root.hostPath(ctx.paths.runDir + "/lock"), false);
  if (!lock) return lock.error();
  adapters::state::Journal journal(ctx.root.hostPath(ctx.paths.runDir + "/transaction.journal"));
  return WriterSession{std::move(lock).value(), recoverDomainChanges(ctx.root, ctx.writer, journal, ::time(nullptr))};
}

core::Result<HostView> readHostView(const adapters::sysfs::Root& root, const core::PolicySet& policies) {
  auto host = adapters::sysfs::readHost(root);
  if (!host) return core::Error{host.error().code, "", "cannot read the host: " + host.error().describe()};
  readPolicyModules(root, policies, *host);
  HostView view;
  if (root.isLive()) {
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

core::Plan planFor(const HostView& view, const core::PolicySet& policies, const ReconcileRequest& request,
                   std::vector<std::string>* absent) {
  core::PlanOptions po;
  po.trigger = request.trigger;
  po.adviseOnly = request.adviseOnly;
  const core::PlanInput in{view.status.host, view.status.mode, view.status.findings};
  if (request.devices.empty()) return core::plan(in, policies, po);
  core::Plan merged;
  merged.trigger = request.trigger;
  for (const auto& address : request.devices) {
    if (view.status.host.device(address) == nullptr) {
      if (absent != nullptr) absent->push_back(address);
      continue;
    }
    po.device = address;
    merge(merged, core::plan(in, policies, po));
  }
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
    auto view = readHostView(ctx.root, policies);
    if (!view) return view.error();
    auto plan = planFor(*view, policies, request, round == 0 ? &out.absent : nullptr);
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

}  // namespace iommud::app
