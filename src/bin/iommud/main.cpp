#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>

#include "app/change/planning.hpp"
#include "app/daemon/daemon.hpp"
#include "app/daemon/time_bound.hpp"
#include "config/daemon_config.hpp"
#include "config/policy_loader.hpp"

namespace {

// What the initramfs hooks copy into the image: the policy directories iommud.conf names (or the
// default layers), one per line.
int printPolicyDirs(const std::string& configFile) {
  auto conf = iommud::config::loadDaemonConfig(configFile, iommud::app::configOwner());
  for (const auto& d : conf.diagnostics) std::fprintf(stderr, "%s\n", d.str().c_str());
  if (!conf.ok()) return iommud::app::kExitConfig;
  auto dirs = conf.config.policyDirs.empty() ? iommud::config::defaultPolicyDirs() : conf.config.policyDirs;
  for (const auto& d : dirs) std::printf("%s\n", d.c_str());
  return 0;
}

// At boot the pass gets this long: a boot is not held up longer than this, whatever the kernel does.
constexpr std::chrono::seconds kEarlyLimit{30};

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{
        "iommud: applies IOMMU policies to each device at start and when it appears, and logs what "
        "protection each change gives up"};
    auto paths = iommud::app::daemonPathsFromEnvironment();
    iommud::app::DaemonOptions options;
    bool printDirs = false;
    app.add_option("--config", paths.configFile,
                   "Read the configuration from FILE (default: "
                   "$CONFIGURATION_DIRECTORY/iommud.conf, else /etc/iommud/iommud.conf)")
        ->option_text("FILE");
    app.add_option("--root", paths.root, "Work on the host under DIR, a synthetic root (benchmarks and tests)")
        ->option_text("DIR")
        ->check(CLI::ExistingDirectory);
    auto* once =
        app.add_flag("--once", options.once, "Apply the policies to the devices present (as at start), then exit");
    app.add_flag("--early", options.early,
                 "With --once: the boot pass (initramfs, iommud-early.service): only rules with when = \"boot\", "
                 "logging to the kernel's log when there is no journal, done or given up within 30 s")
        ->needs(once);
    app.add_flag("--print-policy-dirs", printDirs,
                 "Print the policy directories the configuration names, one per line (for initramfs hooks)");
    app.set_version_flag("--version", IOMMUD_VERSION);
    CLI11_PARSE(app, argc, argv);
    if (printDirs) return printPolicyDirs(paths.configFile);
    // A captured host has no kernel behind its files: a pass would write into them, or fail at
    // the first unbind, and count as tuned what it never changed.
    if (options.once && paths.root != "/") {
      std::fprintf(stderr,
                   "iommud: --once --root %s would change %s as if it were a host; rehearse with iommuctl apply "
                   "--root %s --simulate\n",
                   paths.root.c_str(), paths.root.c_str(), paths.root.c_str());
      return 2;
    }
    if (!options.early) {
      auto log = iommud::adapters::systemd::Log::fromEnvironment();
      return iommud::app::runDaemon(paths, options, log);
    }
    auto log = iommud::adapters::systemd::Log::forEarlyBoot();
    return iommud::app::runWithin(
        kEarlyLimit, [&] { return iommud::app::runDaemon(paths, options, log); }, log);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iommud: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE
  }
}
