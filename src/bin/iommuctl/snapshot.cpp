#include "app/report/snapshot.hpp"

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

void addSnapshot(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand("snapshot", "Capture every file `status` reads into a tar, for a bug report");
  struct Options {
    std::string file;
    bool noRedact = false;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("FILE", opts->file, "The tar file to write")->required();
  cmd->add_flag("--no-redact", opts->noRedact,
                "Keep NVMe serials, mount paths, addresses and non-IOMMU command-line values");
  cmd->callback([&globals, &code, opts] {
    auto result =
        app::takeSnapshot(globals.root, opts->file, !opts->noRedact, static_cast<long long>(std::time(nullptr)));
    if (!result) {
      std::fprintf(stderr, "iommuctl: snapshot failed: %s\n", result.error().describe().c_str());
      code = 1;
      return;
    }
    std::printf("wrote %s: %zu files, %zu links, %zu directories (%s)\n", opts->file.c_str(), result->files,
                result->links, result->dirs, opts->noRedact ? "not redacted" : "redacted");
    std::printf("read it back with: mkdir snap && tar -xf %s -C snap && iommuctl --root snap status\n",
                opts->file.c_str());
  });
}

}  // namespace iommud::ctl
