#include <cstdio>
#include <exception>

#include "bin/iommuctl/commands.hpp"

int main(int argc, char** argv) {
  try {
    CLI::App app{"iommuctl: see and tune what the IOMMU costs and protects, device by device"};
    app.require_subcommand(1);
    app.set_version_flag("--version", IOMMUD_VERSION);
    iommud::ctl::Globals globals;
    app.add_option("--root", globals.root, "Read the host under DIR (a snapshot or a synthetic root)")
        ->option_text("DIR")
        ->check(CLI::ExistingDirectory);
    int code = 0;
    iommud::ctl::addStatus(app, globals, code);
    iommud::ctl::addPlan(app, globals, code);
    iommud::ctl::addExplain(app, globals, code);
    iommud::ctl::addCheck(app, globals, code);
    iommud::ctl::addApply(app, globals, code);
    iommud::ctl::addRevert(app, globals, code);
    iommud::ctl::addSnapshot(app, globals, code);
    iommud::ctl::addTop(app, globals, code);
    CLI11_PARSE(app, argc, argv);
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iommuctl: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE
  }
}
