#include "app/report/top.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "adapters/sysfs/host_reader.hpp"
#include "app/measure/top_run.hpp"
#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

void addTop(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand(
      "top", "Show the DMA mapping work of each device through the IOMMU, live (root; docs/measure.md)");
  struct Options {
    app::TopOptions top;
    std::string sort = "maps";
    std::string color = "auto";
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--seconds", opts->top.seconds, "The interval in seconds (default 1)")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--once", opts->top.once, "Print one interval and exit (SIGINT ends the interval early)");
  cmd->add_flag("--json", opts->top.json,
                "One JSON document per interval (schema: " IOMMUD_SCHEMA_DIR "/top.schema.json)");
  cmd->add_option("--device", opts->top.device, "Only this device (a PCI address or a name such as nvme0)");
  cmd->add_flag("--all", opts->top.all, "Show devices without DMA work too");
  std::vector<std::string> sortNames;
  std::string sortHelp;  // "maps, mib, ... or device"
  for (const auto& [key, name] : core::kDmaSortKeyNames) {
    if (!sortNames.empty()) sortHelp += key == core::kDmaSortKeyNames.back().first ? " or " : ", ";
    sortHelp += name;
    sortNames.emplace_back(name);
  }
  cmd->add_option("--sort", opts->sort, sortHelp)->check(CLI::IsMember(sortNames));
  cmd->add_option("--color", opts->color, "Colour the output: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->callback([&globals, &code, opts] {
    adapters::sysfs::Root root(globals.root);
    if (!root.isLive()) {
      std::fputs("iommuctl: top measures the running kernel; it cannot work under --root\n", stderr);
      code = kUsageStatus;
      return;
    }
    app::TopOptions top = opts->top;
    if (auto key = core::valueNamed(core::kDmaSortKeyNames, opts->sort)) top.sort = *key;
    top.color = useColor(opts->color);
    top.width = textWidth();
    if (!top.device.empty()) {
      auto host = adapters::sysfs::readHost(root);
      if (!host) {
        std::fprintf(stderr, "iommuctl: cannot read the host: %s\n", host.error().describe().c_str());
        code = 1;
        return;
      }
      const auto* d = deviceNamed(*host, top.device);
      if (d == nullptr) {
        code = 1;
        return;
      }
      top.device = d->address;
    }
    code = app::runTop(root, top);
  });
}

}  // namespace iommud::ctl
