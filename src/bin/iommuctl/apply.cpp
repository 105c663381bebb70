#include "app/apply.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "adapters/dbus/manager_client.hpp"
#include "adapters/state/lock.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

namespace {

// What every writer does first: refuse --root and non-root callers, then take the lock and recover
// (app::beginWriting), saying what recovery found.
std::optional<app::WriterSession> startWriting(const Globals& globals, app::ApplyContext& ctx, const char* what) {
  if (globals.root != "/") {
    std::fprintf(stderr, "iommuctl: %s changes the running system; --root only reads (try `iommuctl plan`)\n", what);
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
  if (session->recovered) {
    const auto& r = *session->recovered;
    std::printf("recovered: group %d, left half-done by an earlier process: %s; rebound %zu device(s)\n",
                r.record.change.group, r.outcome.c_str(), r.rebound.size());
  }
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

int report(const std::vector<app::Outcome>& outcomes) {
  std::vector<adapters::dbus::Action> actions;
  actions.reserve(outcomes.size());
  for (const auto& o : outcomes) actions.push_back({"", std::string(app::toString(o.result)), o.device, o.message});
  return report(actions);
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

void addApply(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand("apply", "Make the changes the policies plan (advice is printed, not made)");
  struct Options : ReportOptions {
    std::string device;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--device", opts->device, "Apply only what concerns this device (PCI address, netdev or NVMe name)")
      ->option_text("DEVICE");
  cmd->add_flag("--hotplug", opts->hotplug, "Decide as if the devices had just appeared (disruptive changes allowed)");
  addPoliciesOption(cmd, opts->policies);
  cmd->callback([&globals, &code, opts] {
    if (auto daemon = runningDaemon(globals)) {
      if (!opts->policies.empty()) {
        std::fprintf(stderr,
                     "iommuctl: iommud is running and applies its own policies; drop --policies (or stop "
                     "iommud to apply others)\n");
        code = 1;
        return;
      }
      code = reportFromDaemon(daemon->apply(opts->hotplug, opts->device), "apply");
      return;
    }
    adapters::sysfs::Root root(globals.root);
    adapters::sysfs::RootWriter writer(root);
    app::ApplyContext ctx{root, writer, nullptr, globals.state, app::utcNow, {}};
    auto lock = startWriting(globals, ctx, "apply");
    if (!lock) {
      code = 1;
      return;
    }
    auto loaded = loadPolicies(globals, opts->policies);
    if (!loaded) {
      code = 1;
      return;
    }
    app::ReconcileRequest request;
    request.trigger = opts->hotplug ? core::Trigger::Hotplug : core::Trigger::Coldplug;
    if (!opts->device.empty()) {
      auto host = adapters::sysfs::readHost(root);
      const auto* d = host ? deviceNamed(*host, opts->device) : nullptr;
      if (d == nullptr) {
        if (!host) std::fprintf(stderr, "iommuctl: cannot read the host: %s\n", host.error().describe().c_str());
        code = 1;
        return;
      }
      request.devices.push_back(d->address);
    }
    auto done = app::reconcile(loaded->policies, request, ctx);
    if (!done) {
      std::fprintf(stderr, "iommuctl: %s\n", done.error().describe().c_str());
      code = 1;
      return;
    }
    code = report(done->outcomes);
  });
}

void addRevert(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand(
      "revert", "Restore what iommud changed, where the value is still the one it wrote (drift is reported)");
  auto device = std::make_shared<std::string>();
  cmd->add_option("--device", *device, "Revert only what concerns this device (PCI address, netdev or NVMe name)")
      ->option_text("DEVICE");
  cmd->callback([&globals, &code, device] {
    if (auto daemon = runningDaemon(globals)) {
      code = reportFromDaemon(daemon->revert(*device), "revert");
      return;
    }
    adapters::sysfs::Root root(globals.root);
    adapters::sysfs::RootWriter writer(root);
    app::ApplyContext ctx{root, writer, nullptr, globals.state, app::utcNow, {}};
    auto lock = startWriting(globals, ctx, "revert");
    if (!lock) {
      code = 1;
      return;
    }
    auto host = adapters::sysfs::readHost(root);
    if (!host) {
      std::fprintf(stderr, "iommuctl: cannot read the host: %s\n", host.error().describe().c_str());
      code = 1;
      return;
    }
    std::optional<std::string> only;
    if (!device->empty()) {
      const auto* d = deviceNamed(*host, *device);
      if (d == nullptr) {
        code = 1;
        return;
      }
      only = d->address;
    }
    auto ethtool = app::NetlinkEthtool::open(host->kernel.upstream.version);
    if (ethtool) ctx.ethtool = ethtool->get();
    code = report(app::revertChanges(only, *host, ctx));
  });
}

}  // namespace iommud::ctl
