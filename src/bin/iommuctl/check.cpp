#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

void addCheck(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand(
      "check", "Validate policy files and print what the daemon would log; exit 0 only when all are valid");
  auto paths = std::make_shared<std::vector<std::string>>();
  cmd->add_option("PATHS", *paths,
                  "Policy files or directories (default: the installed layers); directories are layers, the first "
                  "with the highest precedence")
      ->check(CLI::ExistingPath);
  cmd->callback([&globals, &code, paths] {
    app::PolicySources sources;
    sources.root = globals.root;
    for (const auto& p : *paths) {
      struct stat st {};
      bool dir = ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      (dir ? sources.dirs : sources.files).push_back(p);
    }
    auto loaded = app::loadPolicies(sources);
    std::fputs(app::checkText(loaded).c_str(), stdout);
    if (!loaded.ok()) code = 1;
  });
}

}  // namespace iommud::ctl
