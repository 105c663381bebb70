#include <cstdio>
#include <memory>

#include "app/change/record_store.hpp"
#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

void addExplain(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand("explain", "Explain one device: its group, the rules that match it, the decisions");
  struct Options : ReportOptions {
    std::string device;
    double measure = 0;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("DEVICE", opts->device, "PCI address (0000:3d:00.0 or 3d:00.0), netdev or NVMe name")->required();
  addReportOptions(cmd, *opts);
  addMeasureOption(cmd, opts->measure);
  cmd->callback([&globals, &code, opts] {
    auto p = preparePlanning(globals, opts->policies);
    if (!p) {
      code = 1;
      return;
    }
    // The exposure names the rule of a domain change iommud made: its records say which.
    p->status.changes = app::readRecords(adapters::sysfs::Root(globals.root), globals.state);
    const auto* d = deviceNamed(p->status.host, opts->device);
    if (d == nullptr) {
      code = 1;
      return;
    }
    core::PlanInput in{p->status.host, p->status.mode, p->status.findings};
    core::PlanOptions po;
    po.trigger = triggerOf(*opts);
    po.device = d->address;
    po.reportOverridden = true;
    auto plan = core::plan(in, p->policies.policies, po);
    app::listInitramfsFor(adapters::sysfs::Root(globals.root), plan, p->status);
    auto evaluations = core::evaluateRules(in, p->policies.policies, *d);
    // After planning: what a window saw is for people, policies decide on the host's facts.
    if (opts->measure > 0 && !measureInto(globals, opts->measure, p->status, code)) return;
    std::fputs(opts->json ? app::explainJson(*d, p->status, evaluations, plan).c_str()
                          : app::explainText(*d, p->status, p->policies.policies, evaluations, plan,
                                             useColor(opts->color), textWidth())
                                .c_str(),
               stdout);
  });
}

}  // namespace iommud::ctl
