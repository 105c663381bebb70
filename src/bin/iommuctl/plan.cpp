#include <cstdio>
#include <memory>

#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

void addPlan(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand("plan", "Show what the policies would change on this host, and what it costs");
  struct Options : ReportOptions {
    std::string device;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--device", opts->device, "Plan only for this device (PCI address, netdev or NVMe name)")
      ->option_text("DEVICE");
  addReportOptions(cmd, *opts);
  cmd->callback([&globals, &code, opts] {
    auto p = preparePlanning(globals, opts->policies);
    if (!p) {
      code = 1;
      return;
    }
    auto po = planOptions(p->status.host, triggerOf(*opts), opts->device);
    if (!po) {
      code = 1;
      return;
    }
    auto plan = core::plan({p->status.host, p->status.mode, p->status.findings}, p->policies.policies, *po);
    app::listInitramfsFor(adapters::sysfs::Root(globals.root), plan, p->status);
    std::fputs(opts->json
                   ? app::planJson(plan, p->policies.policies).c_str()
                   : app::planText(plan, p->status, p->policies.policies, useColor(opts->color), textWidth()).c_str(),
               stdout);
  });
}

}  // namespace iommud::ctl
