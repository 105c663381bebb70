#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "app/daemon.hpp"

int main(int argc, char** argv) {
  try {
    CLI::App app{
        "iommud: applies IOMMU policies to each device at start and when it appears, and logs what "
        "protection each change gives up"};
    auto paths = iommud::app::daemonPathsFromEnvironment();
    bool once = false;
    app.add_option("--config", paths.configFile,
                   "Read the configuration from FILE (default: "
                   "$CONFIGURATION_DIRECTORY/iommud.conf, else /etc/iommud/iommud.conf)")
        ->option_text("FILE");
    app.add_option("--root", paths.root, "Work on the host under DIR, a synthetic root (benchmarks and tests)")
        ->option_text("DIR")
        ->check(CLI::ExistingDirectory);
    app.add_flag("--once", once, "Apply the policies to the devices present (as at start), then exit");
    app.set_version_flag("--version", IOMMUD_VERSION);
    CLI11_PARSE(app, argc, argv);
    auto log = iommud::adapters::systemd::Log::fromEnvironment();
    return iommud::app::runDaemon(paths, once, log);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iommud: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE
  }
}
