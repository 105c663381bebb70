#include <cstdio>
#include <string>

#include "app/measure/top_run.hpp"
#include "bin/iommuctl/commands.hpp"
#include "core/measured_findings.hpp"

namespace iommud::ctl {

void addMeasureOption(CLI::App* cmd, double& seconds) {
  cmd->add_option("--measure", seconds,
                  "Count DMA mapping work for N seconds and put it into the findings (root; docs/measure.md)")
      ->option_text("N")
      ->check(CLI::Range(0.1, 3600.0));
}

bool measureInto(const Globals& globals, double seconds, app::Status& status, int& code) {
  adapters::sysfs::Root root(globals.root);
  if (!root.isLive()) {
    std::fputs("iommuctl: --measure counts on the running kernel; it cannot work under --root\n", stderr);
    code = kUsageStatus;
    return false;
  }
  auto window = app::measureWindow(root, seconds, status.host);
  if (!window) {
    // Measuring degrades, never blanks: the rest is printed, and the exit status says it is partial.
    std::fprintf(stderr, "iommuctl: not measured, so what follows has no measurements: %s\n",
                 window.error().describe().c_str());
    code = 1;
    return true;
  }
  core::addMeasurements(status.findings, *window);
  if (std::string quiet = core::quietWindow(*window); !quiet.empty()) {
    std::fprintf(stderr, "iommuctl: %s\n", quiet.c_str());
  }
  return true;
}

}  // namespace iommud::ctl
