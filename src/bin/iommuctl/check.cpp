#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "app/change/policy_check.hpp"
#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

namespace {

bool isDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

void addCheck(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand(
      "check", "Validate policy files and print what the daemon would log; exit 0 only when all are valid");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto strict = std::make_shared<bool>(false);
  cmd->add_option("PATHS", *paths,
                  "Policy files or directories (default: the installed layers); directories are layers, the first "
                  "with the highest precedence; files alone are read with the installed layers")
      ->check(CLI::ExistingPath);
  cmd->add_flag("--strict", *strict, "Exit 1 on warnings too (settings that can never act, among others)");
  cmd->callback([&globals, &code, paths, strict] {
    app::PolicySources sources;
    sources.root = globals.root;
    for (const auto& p : *paths) (isDir(p) ? sources.dirs : sources.files).push_back(p);
    // A drop-in overrides rules of the layers: files alone are checked among them, in the highest.
    if (sources.dirs.empty() && !sources.files.empty()) {
      std::string read;
      for (auto& d : app::policyLayers(globals.root)) {
        if (isDir(d)) read += (read.empty() ? "" : ", ") + d;
        sources.dirs.push_back(std::move(d));
      }
      if (!read.empty()) std::printf("also read the layers: %s\n", read.c_str());
    }
    auto loaded = app::loadPolicies(sources);
    app::lintPolicies(adapters::sysfs::Root(globals.root), loaded);
    std::fputs(app::checkText(loaded).c_str(), stdout);
    const bool warned = std::any_of(loaded.diagnostics.begin(), loaded.diagnostics.end(),
                                    [](const auto& d) { return d.severity == config::Diagnostic::Severity::Warning; });
    if (!loaded.ok() || (*strict && warned)) code = 1;
  });
}

}  // namespace iommud::ctl
