#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "app/report/text_style.hpp"
#include "bin/iommuctl/commands.hpp"
#include "config/policy_loader.hpp"

namespace iommud::ctl {

std::optional<config::Loaded> validPolicies(const Globals& globals, const std::vector<std::string>& policyDirs) {
  app::PolicySources sources;
  sources.root = globals.root;
  sources.dirs = policyDirs;
  auto loaded = app::loadPolicies(sources);
  for (const auto& d : loaded.diagnostics) std::fprintf(stderr, "%s\n", d.str().c_str());
  if (!loaded.ok()) {
    std::fprintf(stderr, "iommuctl: the policies are not valid (see `iommuctl check`)\n");
    return std::nullopt;
  }
  return loaded;
}

std::optional<Planning> preparePlanning(const Globals& globals, const std::vector<std::string>& policyDirs) {
  auto loaded = validPolicies(globals, policyDirs);
  if (!loaded) return std::nullopt;
  adapters::sysfs::Root root(globals.root);
  auto view = app::readHostView(root, loaded->policies);
  if (!view) {
    std::fprintf(stderr, "iommuctl: %s\n", view.error().describe().c_str());
    return std::nullopt;
  }
  if (!view->ethtoolError.empty())
    std::fprintf(stderr, "iommuctl: NIC settings not read: %s\n", view->ethtoolError.c_str());
  return Planning{std::move(view->status), std::move(loaded).value(), std::move(view->ethtool)};
}

std::optional<core::PlanOptions> planOptions(const core::HostFacts& host, core::Trigger trigger,
                                             const std::string& device) {
  core::PlanOptions po;
  po.trigger = trigger;
  if (!device.empty()) {
    const auto* d = deviceNamed(host, device);
    if (d == nullptr) return std::nullopt;
    po.device = d->address;
  }
  return po;
}

std::string noSuchDevice(const std::string& name) {
  return "no device " + name + " on this host (try `iommuctl status`)";
}

const core::PciDevice* deviceNamed(const core::HostFacts& host, const std::string& name) {
  const auto* d = app::findDevice(host, name);
  if (d == nullptr) std::fprintf(stderr, "iommuctl: %s\n", noSuchDevice(name).c_str());
  return d;
}

void addPoliciesOption(CLI::App* cmd, std::vector<std::string>& dirs) {
  cmd->add_option("--policies", dirs,
                  fmt::format("Read policies from DIR instead of {} (repeatable; the first has the highest precedence)",
                              fmt::join(config::defaultPolicyDirs(), ", ")))
      ->option_text("DIR")
      ->allow_extra_args(false)  // one directory per --policies: a positional after it stays one
      ->check(CLI::ExistingDirectory);
}

void addReportOptions(CLI::App* cmd, ReportOptions& opts) {
  cmd->add_flag("--json", opts.json,
                "Print JSON (schema: " IOMMUD_SCHEMA_DIR "/plan.schema.json or explain.schema.json)");
  auto* hotplug = cmd->add_flag("--hotplug", opts.hotplug,
                                "Decide as if the devices had just appeared (what hotplug would do), not as at start");
  cmd->add_flag("--boot", opts.boot,
                "Decide as `iommud --early` does at boot: only rules with when = \"boot\", disruptive changes allowed")
      ->excludes(hotplug);
  cmd->add_option("--color", opts.color, "Colour the output: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  addPoliciesOption(cmd, opts.policies);
}

core::Trigger triggerOf(const ReportOptions& opts) {
  if (opts.boot) return core::Trigger::Boot;
  return opts.hotplug ? core::Trigger::Hotplug : core::Trigger::Coldplug;
}

bool useColor(const std::string& option) {
  if (option != "auto") return option == "always";
  // NO_COLOR counts when it is not empty; a dumb terminal, or one that does not say what it is,
  // would show the escape codes as text.
  const char* noColor = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) != 0 && (noColor == nullptr || *noColor == '\0') && term != nullptr &&
         std::string_view(term) != "dumb";
}

size_t textWidth() {
  constexpr size_t kNarrowest = 40;
  size_t width = app::kTextWidth;
  winsize ws{};
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && *columns != '\0') {
    char* end = nullptr;
    const unsigned long n = std::strtoul(columns, &end, 10);
    if (*end == '\0' && n > 0 && n < 10000) return std::max<size_t>(n, kNarrowest);
  }
  if (isatty(STDOUT_FILENO) != 0 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) width = ws.ws_col;
  return std::max(width, kNarrowest);
}

}  // namespace iommud::ctl
