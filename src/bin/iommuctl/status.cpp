#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <ctime>
#include <string>

#include "adapters/dbus/manager_client.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "app/change/domain_transaction.hpp"
#include "app/change/record_store.hpp"
#include "app/fleet/fleet_export.hpp"
#include "app/measure/top_run.hpp"
#include "app/report/device_report.hpp"
#include "app/report/status_report.hpp"
#include "bin/iommuctl/commands.hpp"
#include "core/measured_findings.hpp"
#include "core/state_findings.hpp"

namespace iommud::ctl {

namespace {

struct Options {
  bool json = false;
  std::string format = "text";
  std::string color = "auto";
  double measure = 0;
  bool brief = false;
  std::string device;
  std::vector<std::string> policies;
};

// `status DEVICE`: the device in full, with the rules of the policies that match it; false after
// saying it is not on this host, with the names nearest to it.
bool printDevice(const Globals& globals, const Options& opts, const app::Status& status) {
  const auto* d = app::findDevice(status.host, opts.device);
  if (d == nullptr) {
    auto near = app::nearestDeviceNames(status.host, opts.device);
    std::fprintf(stderr, "iommuctl: no device %s on this host%s (`iommuctl status` lists them)\n", opts.device.c_str(),
                 near.empty() ? "" : fmt::format("; the nearest: {}", fmt::join(near, ", ")).c_str());
    return false;
  }
  // Policies that are not valid leave the rest worth printing: validPolicies said why.
  auto loaded = validPolicies(globals, opts.policies);
  std::vector<core::RuleEvaluation> evaluations;
  if (loaded) {
    evaluations = core::evaluateRules({status.host, status.mode, status.findings}, loaded->policies, *d);
  }
  const auto exposures = app::exposuresOf(status);
  const auto view = app::deviceView(status, *d, exposures, evaluations);
  std::fputs(opts.json || opts.format == "json"
                 ? app::deviceJson(status, view, loaded.has_value()).c_str()
                 : app::deviceText(status, view, loaded.has_value(), useColor(opts.color), textWidth()).c_str(),
             stdout);
  return true;
}

// What the running daemon did, when it runs; it not running is no error.
void askDaemon(app::Status& status) {
  status.daemonAsked = true;
  auto daemon = adapters::dbus::ManagerClient::connect();
  if (!daemon) return;
  auto summary = daemon->daemon();
  if (summary) {
    status.daemon = std::move(summary).value();
  } else {
    std::fprintf(stderr, "iommuctl: iommud runs but did not say what it did: %s\n", summary.error().describe().c_str());
  }
}

// The whole host's status in the formats other than JSON.
std::string statusOutput(const Options& opts, const app::Status& status) {
  // The counters are the daemon's, which D-Bus does not carry: iommuctl says 0 for them.
  if (opts.format == "prometheus") return app::prometheusText(status, {}, std::time(nullptr));
  if (opts.format == "nfd") return app::nfdFeatures(status);
  const bool color = useColor(opts.color);
  const size_t width = textWidth();
  return opts.brief ? app::statusBrief(status, color, width) : app::statusText(status, color, width);
}

// The whole host's status in the format asked for, on standard output. JSON is written as it is
// made: on a large host the document is megabytes.
void printStatus(const Options& opts, const app::Status& status) {
  if (opts.json || opts.format == "json") {
    app::statusJson(status, [](std::string_view piece) { std::fwrite(piece.data(), 1, piece.size(), stdout); });
    return;
  }
  std::fputs(statusOutput(opts, status).c_str(), stdout);
}

}  // namespace

void addStatus(CLI::App& app, const Globals& globals, int& code) {
  auto* cmd = app.add_subcommand("status", "Show the IOMMU, its groups and devices, and known problems");
  auto opts = std::make_shared<Options>();
  cmd->add_option("DEVICE,--device", opts->device,
                  "Only this device, in full: PCI address (0000:3d:00.0 or 3d:00.0), netdev, NVMe or disk name");
  auto* format = cmd->add_option("--format", opts->format,
                                 "text, json (schema: " IOMMUD_SCHEMA_DIR
                                 "/status.schema.json; with DEVICE, device.schema.json), prometheus (a node_exporter "
                                 "textfile) or nfd (a node-feature-discovery feature file)")
                     ->check(CLI::IsMember({"text", "json", "prometheus", "nfd"}));
  cmd->add_flag("--json", opts->json, "Same as --format=json")->excludes(format);
  cmd->add_option("--color", opts->color, "Colour the output: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_flag("--brief", opts->brief,
                "Only the verdict: the protection level, what can reach all memory, the findings with their "
                "first remedy, iommud (what bare iommuctl prints)");
  addMeasureOption(cmd, opts->measure);
  addPoliciesOption(cmd, opts->policies);
  cmd->callback([&globals, &code, opts] {
    if (!opts->device.empty() && (opts->brief || opts->format == "prometheus" || opts->format == "nfd")) {
      std::fprintf(stderr,
                   "iommuctl: status DEVICE prints text or --json; --brief, --format=prometheus and "
                   "--format=nfd are for the whole host\n");
      code = kUsageStatus;
      return;
    }
    adapters::sysfs::Root root(globals.root);
    auto host = adapters::sysfs::readHost(root);
    if (!host) {
      std::fprintf(stderr, "iommuctl: cannot read the host: %s\n", host.error().describe().c_str());
      code = 1;
      return;
    }
    auto status = app::buildStatus(std::move(host).value());
    if (opts->measure > 0 && !measureInto(globals, opts->measure, status, code)) return;
    auto records = app::readRecordsView(root, globals.state);
    status.changes = std::move(records.records);
    // A device a domain change left unbound, a records file not understood: the most severe
    // findings, first.
    auto first = core::unboundFindings(app::unboundDevices(root, globals.state.runDir));
    auto damaged = core::damageFindings(records.damage);
    first.insert(first.end(), damaged.begin(), damaged.end());
    status.findings.insert(status.findings.begin(), first.begin(), first.end());
    if (globals.root == "/") askDaemon(status);
    if (!opts->device.empty()) {
      if (!printDevice(globals, *opts, status)) code = 1;
      return;
    }
    printStatus(*opts, status);
  });
}

}  // namespace iommud::ctl
