#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/change/netlink_ethtool.hpp"
#include "app/change/planning.hpp"
#include "app/change/reconcile.hpp"
#include "app/report/plan_report.hpp"

namespace iommud::ctl {

/// Options every subcommand shares.
struct Globals {
  std::string root = "/";
  app::StatePaths state;  // under --root, inside the root
};

/// Each subcommand registers itself on the app and returns the exit code through `code`.
void addStatus(CLI::App& app, const Globals& globals, int& code);
void addSnapshot(CLI::App& app, const Globals& globals, int& code);
void addPlan(CLI::App& app, const Globals& globals, int& code);
void addExplain(CLI::App& app, const Globals& globals, int& code);
void addCheck(CLI::App& app, const Globals& globals, int& code);
void addApply(CLI::App& app, const Globals& globals, int& code);
void addRevert(CLI::App& app, const Globals& globals, int& code);
void addTop(CLI::App& app, const Globals& globals, int& code);
void addVerify(CLI::App& app, const Globals& globals, int& code);

/// The host and the policies, read as the daemon reads them; nullopt after printing why not.
struct Planning {
  app::Status status;
  config::Loaded policies;
  std::unique_ptr<app::NetlinkEthtool> ethtool;  // on the live host; nullptr under --root
};
std::optional<Planning> preparePlanning(const Globals& globals, const std::vector<std::string>& policyDirs);
/// The policies, with every diagnostic printed; nullopt when they are not valid.
std::optional<config::Loaded> validPolicies(const Globals& globals, const std::vector<std::string>& policyDirs);

/// The options `plan` and `explain` share.
struct ReportOptions {
  bool json = false;
  bool hotplug = false;
  bool boot = false;  // as `iommud --early`: only the boot rules
  std::string color = "auto";
  std::vector<std::string> policies;
};
/// The trigger --hotplug or --boot asks for (coldplug without either).
core::Trigger triggerOf(const ReportOptions& opts);
/// Adds --json, --hotplug, --boot, --color and --policies to a subcommand.
void addReportOptions(CLI::App* cmd, ReportOptions& opts);

/// Plan options for --hotplug and --device (a name or address; empty: the whole host); nullopt
/// after saying the device is not on this host.
std::optional<core::PlanOptions> planOptions(const core::HostFacts& host, core::Trigger trigger,
                                             const std::string& device);

/// The device named on the command line, or nullptr after saying it is not on this host.
const core::PciDevice* deviceNamed(const core::HostFacts& host, const std::string& name);
/// What iommuctl says of a device name no device has.
std::string noSuchDevice(const std::string& name);

/// Adds `--policies DIR` (repeatable) to a subcommand.
void addPoliciesOption(CLI::App* cmd, std::vector<std::string>& dirs);

/// The command line with the options of a subcommand that were written before it moved to just
/// after it, so that `iommuctl --json status` means `iommuctl status --json`. The main command's
/// own options (--root) are accepted after the subcommand as they are: the subcommands fall
/// through to it. Anything it does not recognise stays where it is, for CLI11 to report.
std::vector<std::string> optionsAnywhere(const CLI::App& app, const std::vector<std::string>& args);
/// The exit status of a command line iommuctl cannot take (a runtime failure is 1): docs/man/iommuctl.1.scd.
constexpr int kUsageStatus = 2;
/// `iommuctl help [COMMAND]` as `iommuctl [COMMAND] --help`, as git and systemctl take it.
std::vector<std::string> helpAsOption(const CLI::App& app, const std::vector<std::string>& args);
/// A command line that names no command (only global options, or nothing) as `status --brief`:
/// bare `iommuctl` gives the verdict, as bare `systemctl` gives its overview.
std::vector<std::string> verdictWhenBare(const CLI::App& app, std::vector<std::string> args);
/// Says on stderr why CLI11 refused `args` (the command line as parsed), in words where it is a
/// common mistake (with the nearest spelling of a misspelt command or option); the usage status.
int usageError(const CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e);
/// Adds `--measure N` (status, explain).
void addMeasureOption(CLI::App* cmd, double& seconds);
/// Counts DMA mapping work for `seconds` on the live host and puts it into the status's findings
/// (docs/measure.md). False for a usage error (under --root), after saying so; when the kernel
/// cannot be measured, true after saying why and setting `code` to 1: the rest is printed anyway.
bool measureInto(const Globals& globals, double seconds, app::Status& status, int& code);

/// Whether to colour: --color=always, or auto on a terminal that is not TERM=dumb, without NO_COLOR.
bool useColor(const std::string& option);
/// The columns the text is wrapped to: COLUMNS when set to a number (as systemd's tools take it),
/// else the terminal's width when standard output is one, else app::kTextWidth; at least 40.
size_t textWidth();

}  // namespace iommud::ctl
