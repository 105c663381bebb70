#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bin/iommuctl/commands.hpp"

int main(int argc, char** argv) {
  try {
    CLI::App app{"iommuctl: see and tune what the IOMMU costs and protects, device by device"};
    app.require_subcommand(1);
    // Options anywhere, as systemctl takes them: a subcommand passes what it does not know (--root)
    // to the main command, and optionsAnywhere() moves a subcommand's options written before it.
    app.fallthrough();
    app.set_version_flag("--version", IOMMUD_VERSION);
    iommud::ctl::Globals globals;
    globals.state = iommud::ctl::statePathsFromEnvironment();
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
    auto args = iommud::ctl::optionsAnywhere(app, std::vector<std::string>(argv, argv + argc));
    std::vector<char*> argvAnywhere;
    argvAnywhere.reserve(args.size());
    for (auto& a : args) argvAnywhere.push_back(a.data());
    CLI11_PARSE(app, static_cast<int>(argvAnywhere.size()), argvAnywhere.data());
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iommuctl: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE
  }
}
