#include "app/apply.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "adapters/state/lock.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

namespace {

std::string utcNow() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What every writer does first: refuse --root and non-root callers, take the one writer lock,
// and finish or roll back a transaction an earlier process left half-done.
std::optional<adapters::state::WriterLock> startWriting(const Globals& globals, const app::ApplyContext& ctx,
                                                        const char* what) {
  if (globals.root != "/") {
    std::fprintf(stderr, "iommuctl: %s changes the running system; --root only reads (try `iommuctl plan`)\n", what);
    return std::nullopt;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "iommuctl: %s needs root\n", what);
    return std::nullopt;
  }
  if (auto made = adapters::state::makeDirectories(ctx.paths.runDir); !made) {
    std::fprintf(stderr, "iommuctl: %s\n", made.error().describe().c_str());
    return std::nullopt;
  }
  auto lock = adapters::state::WriterLock::acquire(ctx.paths.runDir + "/lock", false);
  if (!lock) {
    std::fprintf(stderr, "iommuctl: %s\n", lock.error().describe().c_str());
    return std::nullopt;
  }
  adapters::state::Journal journal(ctx.paths.runDir + "/transaction.journal");
  auto recovered = app::recoverDomainChange(ctx.root, ctx.writer, journal);
  if (!recovered) {
    std::fprintf(stderr, "iommuctl: cannot recover the last transaction: %s\n", recovered.error().describe().c_str());
    return std::nullopt;
  }
  if (*recovered) {
    const auto& r = **recovered;
    std::printf("recovered: group %d, left half-done by an earlier process: %s; rebound %zu device(s)%s\n",
                r.record.change.group, r.outcome.c_str(), r.rebound.size(),
                r.failed.empty() ? "" : ", SOME COULD NOT BE REBOUND (see dmesg)");
    if (!r.failed.empty()) return std::nullopt;
  }
  return std::move(lock).value();
}

// tests/vm's pause point: after the first unbind, create DIR/paused and wait (at most 10 minutes)
// until DIR/resume exists, so that a test can remove a device or kill this process right there.
app::TransactionHooks pauseAfterUnbind(const std::string& dir) {
  app::TransactionHooks hooks;
  if (dir.empty()) return hooks;
  hooks.afterStep = [dir, paused = false](std::string_view step) mutable {
    if (paused || step.rfind("unbind ", 0) != 0) return;
    paused = true;
    std::ofstream(dir + "/paused") << step << '\n';
    std::fprintf(stderr, "iommuctl: paused after %.*s until %s/resume exists\n", static_cast<int>(step.size()),
                 step.data(), dir.c_str());
    for (int i = 0; i < 30000 && !std::filesystem::exists(dir + "/resume"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  return hooks;
}

int report(const std::vector<app::Outcome>& outcomes) {
  int code = 0;
  for (const auto& o : outcomes) {
    std::printf("%-8s %s\n", (std::string(app::toString(o.result)) + ":").c_str(), o.message.c_str());
    if (o.result == app::Outcome::Result::Failed || o.result == app::Outcome::Result::Refused) code = 1;
  }
  if (outcomes.empty()) std::printf("nothing to do\n");
  return code;
}

}  // namespace

void addApply(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand("apply", "Make the changes the policies plan (advice is printed, not made)");
  struct Options : ReportOptions {
    std::string device;
    std::string pauseDir;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--device", opts->device, "Apply only what concerns this device (PCI address, netdev or NVMe name)")
      ->option_text("DEVICE");
  cmd->add_flag("--hotplug", opts->hotplug, "Decide as if the devices had just appeared (disruptive changes allowed)");
  addPoliciesOption(cmd, opts->policies);
  // Hidden (no group): a test-only pause point for tests/vm.
  cmd->add_option("--test-pause-after-unbind", opts->pauseDir)->group("");
  cmd->callback([&globals, &code, opts] {
    adapters::sysfs::Root root(globals.root);
    adapters::sysfs::RootWriter writer(root);
    app::ApplyContext ctx{root, writer, nullptr, {}, utcNow, pauseAfterUnbind(opts->pauseDir)};
    auto lock = startWriting(globals, ctx, "apply");
    if (!lock) {
      code = 1;
      return;
    }
    std::vector<app::Outcome> all;
    // A domain change rebinds drivers: what else the plan has for that group is planned again on
    // the fresh devices, in a second round.
    for (int round = 0; round < 2; ++round) {
      auto p = preparePlanning(globals, opts->policies);
      if (!p) {
        code = 1;
        return;
      }
      auto po = planOptions(p->status.host, opts->hotplug, opts->device);
      if (!po) {
        code = 1;
        return;
      }
      auto plan = core::plan({p->status.host, p->status.mode, p->status.findings}, p->policies.policies, *po);
      ctx.ethtool = p->ethtool.get();
      auto outcomes = app::applyPlan(plan, p->status.host, ctx);
      ctx.ethtool = nullptr;
      if (round == 0) {  // what the policies want but will not happen, and why (as `plan` says)
        for (const auto& sk : plan.skips) {
          all.push_back(
              app::Outcome{app::Outcome::Result::Skipped, sk.kind, sk.device, sk.object, sk.key,
                           sk.object + " " + sk.key + " " + sk.wanted + " (rule " + sk.rule.name + "): " + sk.message});
        }
      }
      bool again = std::any_of(outcomes.begin(), outcomes.end(), [](const app::Outcome& o) {
        return o.result == app::Outcome::Result::Kept && o.message.find("rebound") != std::string::npos;
      });
      for (auto& o : outcomes) {
        if (!(again && o.result == app::Outcome::Result::Kept)) all.push_back(std::move(o));
      }
      if (!again) break;
    }
    code = report(all);
  });
}

void addRevert(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand(
      "revert", "Restore what iommud changed, where the value is still the one it wrote (drift is reported)");
  auto device = std::make_shared<std::string>();
  cmd->add_option("--device", *device, "Revert only what concerns this device (PCI address, netdev or NVMe name)")
      ->option_text("DEVICE");
  cmd->callback([&globals, &code, device] {
    adapters::sysfs::Root root(globals.root);
    adapters::sysfs::RootWriter writer(root);
    app::ApplyContext ctx{root, writer, nullptr, {}, utcNow, {}};
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
