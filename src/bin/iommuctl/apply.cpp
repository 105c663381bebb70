#include "app/change/apply.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "adapters/dbus/manager_client.hpp"
#include "adapters/state/lock.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "app/measure/top_run.hpp"
#include "bin/iommuctl/commands.hpp"
#include "core/measured_effect.hpp"
#include "support/utc_time.hpp"

namespace iommud::ctl {

namespace {

// What every writer does first: refuse --root and non-root callers, then take the lock and recover
// (app::beginWriting), saying what recovery found.
std::optional<app::WriterSession> startWriting(const Globals& globals, app::ApplyContext& ctx, const char* what,
                                               const char* instead) {
  if (globals.root != "/") {
    std::fprintf(stderr, "iommuctl: %s changes the running system; --root only reads (try `%s`)\n", what, instead);
    return std::nullopt;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "iommuctl: %s needs root\n", what);
    return std::nullopt;
  }
  auto session = app::beginWriting(ctx);
  if (!session) {
    std::fprintf(stderr, "iommuctl: %s\n", session.error().describe().c_str());
    return std::nullopt;
  }
  for (const auto& r : session->recovered.recovered) {
    std::printf("recovered: group %d, left half-done by an earlier process: %s; rebound %zu device(s)\n",
                r.record.change.group, r.outcome.c_str(), r.rebound.size());
  }
  // Not fatal: what recovery could not resolve must not stop the change asked for.
  for (const auto& p : session->recovered.problems) std::fprintf(stderr, "iommuctl: warning: %s\n", p.c_str());
  if (auto d = session->degraded(); !d.empty()) std::fprintf(stderr, "iommuctl: warning: degraded: %s\n", d.c_str());
  return std::move(session).value();
}

// One line per outcome, "done:    what"; 1 when anything failed or was refused.
int report(const std::vector<adapters::dbus::Action>& actions) {
  int code = 0;
  for (const auto& a : actions) {
    std::printf("%-8s %s\n", (a.result + ":").c_str(), a.message.c_str());
    if (a.result == app::toString(app::Outcome::Result::Failed) ||
        a.result == app::toString(app::Outcome::Result::Refused)) {
      code = 1;
    }
  }
  if (actions.empty()) std::printf("nothing to do\n");
  return code;
}

std::vector<adapters::dbus::Action> actionsOf(const std::vector<app::Outcome>& outcomes) {
  std::vector<adapters::dbus::Action> actions;
  actions.reserve(outcomes.size());
  for (const auto& o : outcomes) actions.push_back({"", std::string(app::toString(o.result)), o.device, o.message});
  return actions;
}

// The running daemon, when there is one: then it is the one writer, and apply and revert are asked
// of it. nullopt: no daemon (or --root), work on the host here.
std::optional<adapters::dbus::ManagerClient> runningDaemon(const Globals& globals) {
  if (globals.root != "/") return std::nullopt;
  return adapters::dbus::ManagerClient::connect();
}

// What the daemon answered, printed as a local run would print it.
int reportFromDaemon(const core::Result<std::vector<adapters::dbus::Action>>& actions, const char* what) {
  if (!actions) {
    std::fprintf(stderr, "iommuctl: %s through iommud: %s\n", what, actions.error().describe().c_str());
    return 1;
  }
  return report(*actions);
}

}  // namespace

namespace {

struct ApplyOptions : ReportOptions {
  std::string device;
  double measure = 0;
  bool simulate = false;
};

// apply --simulate exits with this when the kernel, or a safety rule, would refuse a change
// (docs/man/iommuctl.1.scd, EXIT STATUS).
constexpr int kRefusedStatus = 3;

// apply --simulate: the plan through this kernel's rules, on the host or a snapshot, printed;
// nothing is written, no lock taken, no daemon asked.
int simulate(const Globals& globals, const ApplyOptions& opts) {
  auto p = preparePlanning(globals, opts.policies);
  if (!p) return 1;
  auto po = planOptions(p->status.host, triggerOf(opts), opts.device);
  if (!po) return 1;
  auto plan = core::plan({p->status.host, p->status.mode, p->status.findings}, p->policies.policies, *po);
  app::listInitramfsFor(adapters::sysfs::Root(globals.root), plan, p->status);
  const auto rehearsal = core::rehearse(plan, p->status.host);
  std::fputs(app::rehearsalText(rehearsal, p->status, useColor("auto"), textWidth()).c_str(), stdout);
  return rehearsal.count(core::Rehearsed::Verdict::Refused) == 0 ? 0 : kRefusedStatus;
}

// Applies what the policies plan, through the running daemon or here: what was done, as the
// daemon reports it; nullopt after saying why nothing was done.
std::optional<std::vector<adapters::dbus::Action>> applyOnce(const Globals& globals, const ApplyOptions& opts) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "iommuctl: %s\n", why.c_str());
    return std::nullopt;
  };
  if (auto daemon = runningDaemon(globals)) {
    if (!opts.policies.empty()) {
      return fail("iommud is running and applies its own policies; drop --policies (or stop iommud to apply others)");
    }
    auto actions = daemon->apply(opts.hotplug, opts.device);
    if (!actions) return fail("apply through iommud: " + actions.error().describe());
    return std::move(actions).value();
  }
  adapters::sysfs::Root root(globals.root);
  adapters::sysfs::RootWriter writer(root);
  app::ApplyContext ctx{root, writer, nullptr, globals.state, support::utcNow, {}};
  // A test hook, read only here and honoured only when set: tests/vm kills apply where it stops.
  if (const char* at = std::getenv("IOMMUD_TEST_STOP_AFTER")) ctx.hooks = app::stopAfter(at, [] { ::raise(SIGSTOP); });
  auto lock = startWriting(globals, ctx, "apply", "iommuctl apply --simulate");
  if (!lock) return std::nullopt;
  auto loaded = validPolicies(globals, opts.policies);
  if (!loaded) return std::nullopt;
  app::ReconcileRequest request;
  request.trigger = opts.hotplug ? core::Trigger::Hotplug : core::Trigger::Coldplug;
  if (!opts.device.empty()) request.devices.push_back(opts.device);
  auto done = app::reconcile(loaded->policies, request, ctx);
  if (!done) return fail(done.error().describe());
  if (!done->absent.empty()) return fail(noSuchDevice(opts.device));
  return actionsOf(done->outcomes);
}

// The devices whose DMA a change may have changed: each changed device, and the other members
// of its group (a domain type is the group's).
std::vector<std::string> changedDevices(const std::vector<adapters::dbus::Action>& actions,
                                        const core::HostFacts& host) {
  std::vector<std::string> out;
  for (const auto& a : actions) {
    if (a.result != app::toString(app::Outcome::Result::Done) || a.device.empty()) continue;
    out.push_back(a.device);
    const auto group = host.withGroup(a.device);
    out.insert(out.end(), group.begin(), group.end());
  }
  return out;
}

// apply --measure N: a window before, the change, a window after; the effect per changed device.
int applyMeasured(const Globals& globals, const ApplyOptions& opts) {
  adapters::sysfs::Root root(globals.root);
  if (!root.isLive()) {
    std::fputs("iommuctl: --measure counts on the running kernel; it cannot work under --root\n", stderr);
    return kUsageStatus;
  }
  auto host = adapters::sysfs::readHost(root);
  if (!host) {
    std::fprintf(stderr, "iommuctl: cannot read the host: %s\n", host.error().describe().c_str());
    return 1;
  }
  std::fprintf(stderr, "iommuctl: counting for %g s before the change and %g s after it\n", opts.measure, opts.measure);
  bool ran = false;
  std::optional<std::vector<adapters::dbus::Action>> actions;
  auto measured = app::measureAround(root, opts.measure, *host, [&]() -> core::Result<core::HostFacts> {
    ran = true;
    actions = applyOnce(globals, opts);
    return adapters::sysfs::readHost(root);
  });
  int code = actions ? report(*actions) : 1;
  if (!measured) {
    std::fprintf(stderr, "iommuctl: %s%s\n", ran ? "" : "nothing was changed: ", measured.error().describe().c_str());
    return 1;
  }
  if (!actions) return code;
  auto effects = core::measuredEffects(measured->before, measured->after, changedDevices(*actions, *host));
  for (const auto& e : effects) std::printf("measured: %s\n", core::describe(e).c_str());
  if (effects.empty()) std::printf("measured: no device was changed\n");
  std::printf("measured: %s\n", core::describeHost(measured->before, measured->after).c_str());
  return code;
}

}  // namespace

void addApply(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand("apply", "Make the changes the policies plan (advice is printed, not made)");
  auto opts = std::make_shared<ApplyOptions>();
  cmd->add_option("--device", opts->device, "Apply only what concerns this device (PCI address, netdev or NVMe name)")
      ->option_text("DEVICE");
  cmd->add_flag("--hotplug", opts->hotplug, "Decide as if the devices had just appeared (disruptive changes allowed)");
  cmd->add_option("--measure", opts->measure,
                  "Count DMA mapping work for N seconds before the change and N after it, and print the difference "
                  "per changed device (root; docs/measure.md)")
      ->option_text("N")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--simulate", opts->simulate,
                "Write nothing: print what would be done on this kernel (or the --root snapshot's), what the "
                "kernel would refuse and why, and what is left to advise (exit 3 when something would be refused)")
      ->excludes("--measure");
  addPoliciesOption(cmd, opts->policies);
  cmd->callback([&globals, &code, opts] {
    if (opts->simulate) {
      code = simulate(globals, *opts);
      return;
    }
    if (opts->measure > 0) {
      code = applyMeasured(globals, *opts);
      return;
    }
    auto actions = applyOnce(globals, *opts);
    code = actions ? report(*actions) : 1;
  });
}

void addRevert(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand(
      "revert", "Restore what iommud changed, where the value is still the one it wrote (drift is reported)");
  auto device = std::make_shared<std::string>();
  cmd->add_option("--device", *device, "Revert only what concerns this device (PCI address, netdev or NVMe name)")
      ->option_text("DEVICE");
  auto from = std::make_shared<std::string>();
  cmd->add_option("--from", *from,
                  "Also give back what a records file kept aside holds (one iommud could not understand whole, "
                  "named by iommuctl status); it is renamed *.reverted once done")
      ->option_text("FILE");
  cmd->callback([&globals, &code, device, from] {
    if (auto daemon = runningDaemon(globals)) {
      if (!from->empty()) {
        // The daemon is the one writer and holds the lock: it reverts what it understands when it
        // stops (revert-on-stop), after which this runs on the host itself.
        std::fprintf(stderr,
                     "iommuctl: revert --from runs on the host itself, and iommud is running: stop it first "
                     "(systemctl stop iommud), then run this again\n");
        code = 1;
        return;
      }
      code = reportFromDaemon(daemon->revert(*device), "revert");
      return;
    }
    adapters::sysfs::Root root(globals.root);
    adapters::sysfs::RootWriter writer(root);
    app::ApplyContext ctx{root, writer, nullptr, globals.state, support::utcNow, {}};
    auto lock = startWriting(globals, ctx, "revert", "iommuctl plan");
    if (!lock) {
      code = 1;
      return;
    }
    auto reverted = app::revertNamed(*device, ctx, *from);
    if (!reverted) {
      std::fprintf(
          stderr, "iommuctl: %s\n",
          reverted.error().code == ENODEV ? noSuchDevice(*device).c_str() : reverted.error().describe().c_str());
      code = 1;
      return;
    }
    code = report(actionsOf(reverted->outcomes));
  });
}

}  // namespace iommud::ctl
