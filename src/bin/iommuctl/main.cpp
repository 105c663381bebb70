#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bin/iommuctl/commands.hpp"

namespace {

// A write to stdout that failed (a full disk) fails the command: a script must not take a cut
// output for the whole. stdio keeps that it failed; why is the errno of the write that failed: the
// flush's, or of an earlier write when the output was larger than stdio's buffer (nothing but
// CLI11's return runs after a command's output).
int afterOutput(int code) {
  const bool failed = std::ferror(stdout) != 0;
  const int earlier = errno;
  errno = 0;
  if (std::fflush(stdout) == 0 && !failed) return code;
  const int why = errno != 0 ? errno : earlier;
  std::fprintf(stderr, "iommuctl: cannot write the output: %s\n", why != 0 ? std::strerror(why) : "write error");
  return code != 0 ? code : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"iommuctl: see and tune what the IOMMU costs and protects, device by device"};
    app.require_subcommand(1);
    // Options anywhere, as systemctl takes them: a subcommand passes what it does not know (--root)
    // to the main command, and optionsAnywhere() moves a subcommand's options written before it.
    app.fallthrough();
    app.set_version_flag("-V,--version", "iommuctl " IOMMUD_VERSION_TEXT);
    iommud::ctl::Globals globals;
    // IOMMUD_*, not systemd's RUNTIME_DIRECTORY: another service that runs iommuctl has its own,
    // and a lock there would not exclude iommud.
    globals.state = iommud::app::statePathsFromEnvironment("IOMMUD_");
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
    iommud::ctl::addVerify(app, globals, code);
    // A subcommand's --help lists its own options only; --root, the main command's, is taken there too.
    for (auto* sub : app.get_subcommands({})) {
      if (sub->get_name() == "revert" || sub->get_name() == "top") continue;  // this host only
      sub->footer("Also --root DIR, before or after " + sub->get_name() +
                  ": read the host under DIR (a snapshot or a synthetic root) instead of this one.");
    }
    auto args = iommud::ctl::optionsAnywhere(
        app,
        iommud::ctl::verdictWhenBare(app, iommud::ctl::helpAsOption(app, std::vector<std::string>(argv, argv + argc))));
    std::vector<char*> argvAnywhere;
    argvAnywhere.reserve(args.size());
    for (auto& a : args) argvAnywhere.push_back(a.data());
    try {
      app.parse(static_cast<int>(argvAnywhere.size()), argvAnywhere.data());
    } catch (const CLI::Success& e) {  // --help, --version
      code = app.exit(e);
    } catch (const CLI::ParseError& e) {
      return iommud::ctl::usageError(app, args, e);
    }
    return afterOutput(code);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iommuctl: internal error: %s\n", e.what());
    return 70;  // EX_SOFTWARE
  }
}
