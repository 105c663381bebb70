#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>

#include "app/change/current_values.hpp"
#include "app/change/netlink_ethtool.hpp"
#include "app/change/record_store.hpp"
#include "app/report/verify_report.hpp"
#include "bin/iommuctl/commands.hpp"

namespace iommud::ctl {

namespace {

// verify's exit status when a records file is not understood whole (docs/man/iommuctl.1.scd).
constexpr int kVerifyDamaged = 5;

bool isNicSetting(const app::ChangeRecord& r) {
  return r.kind == core::ChangeKind::Rings || r.kind == core::ChangeKind::Channels ||
         r.kind == core::ChangeKind::Coalesce;
}

}  // namespace

void addVerify(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand(
      "verify", "Compare every value iommud recorded as changed with the host now; name the drift (exit 3)");
  struct Options {
    bool json = false;
    std::string color = "auto";
  };
  auto opts = std::make_shared<Options>();
  cmd->add_flag("--json", opts->json, "JSON (schema: " IOMMUD_SCHEMA_DIR "/verify.schema.json)");
  cmd->add_option("--color", opts->color, "Colour the output: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->callback([&globals, &code, opts] {
    adapters::sysfs::Root root(globals.root);
    const auto view = app::readRecordsView(root, globals.state);
    if (const auto& error = view.unreadable) {
      std::fprintf(stderr, "iommuctl: cannot read what iommud recorded: %s%s\n", error->describe().c_str(),
                   error->code == EACCES ? " (run as root)" : "");
      code = 1;
      return;
    }
    const auto& records = view.records;
    // NIC settings are read over netlink: only on the live host, and only when there is one to read.
    std::unique_ptr<app::NetlinkEthtool> ethtool;
    std::string noEthtool = "NIC settings are read over ethtool netlink, not from a --root";
    if (root.isLive() && std::any_of(records.begin(), records.end(), isNicSetting)) {
      if (auto opened = app::NetlinkEthtool::open(std::nullopt)) {
        ethtool = std::move(opened).value();
      } else {
        noEthtool = opened.error().describe();
      }
    }
    const auto results = app::verifyRecords(records, app::observeRecords(root, records, ethtool.get(), noEthtool));
    code = app::verifyExitStatus(results);
    if (opts->json) {
      std::fputs(app::verifyJson(results).c_str(), stdout);
    } else {
      std::fputs(app::verifyText(results, app::Style{useColor(opts->color), textWidth()}).c_str(), stdout);
    }
    // A records file not understood whole: what it holds beyond the intact records cannot be
    // checked, and that outranks every other verdict.
    if (!view.damage.empty()) {
      std::fprintf(stderr, "iommuctl: iommud's records are damaged: %s; iommuctl status says what to do\n",
                   core::describeDamage(view.damage).c_str());
      code = kVerifyDamaged;
    }
  });
}

}  // namespace iommud::ctl
