// The daemon's D-Bus view and exports bookkeeping, without a bus, a loop or a process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/daemon/bus_view.hpp"
#include "app/daemon/daemon_exports.hpp"
#include "app/report/host_summary.hpp"
#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace daemon_parts_test {

using namespace iommud;
using namespace iommud::testing;
namespace bus = adapters::dbus;

TEST(BusView, TheHostSummaryShowsGroupsDevicesFindingsAndRecordsAsThePropertiesDo) {
  auto h = twoNvmeOneGroup("6.12.48-1");
  auto status = statusOf(*h);
  app::ChangeRecord r;
  r.device = "0000:03:00.0";
  r.group = 20;
  r.object = "group 20";
  r.key = "type";
  r.original = "DMA-FQ";
  r.written = "identity";
  r.rule = "nvme\tpair";  // a tab travels as a space, as before
  r.time = "2026-11-25T12:00:00Z";
  auto view = app::hostSummaryOf(status, {r});
  EXPECT_EQ(view.mode, status.mode.modeName());
  EXPECT_EQ(view.vendor, "intel");
  const auto* g = status.host.group(20);
  ASSERT_NE(g, nullptr);
  auto vg = std::find_if(view.groups.begin(), view.groups.end(), [](const bus::GroupView& x) { return x.id == 20; });
  ASSERT_NE(vg, view.groups.end());
  EXPECT_EQ(vg->devices, g->devices);
  EXPECT_EQ(vg->type, "DMA-FQ");
  ASSERT_EQ(view.devices.size(), status.host.devices.size());
  auto nvme = std::find_if(view.devices.begin(), view.devices.end(),
                           [](const bus::DeviceView& d) { return d.address == "0000:03:00.0"; });
  ASSERT_NE(nvme, view.devices.end());
  EXPECT_EQ(nvme->name, "nvme0");
  EXPECT_EQ(nvme->driver, "nvme");
  EXPECT_EQ(nvme->group, 20);
  EXPECT_EQ(view.findings.size(), status.findings.size());
  ASSERT_EQ(view.changes.size(), 1U);
  EXPECT_EQ(view.changes[0],
            (bus::ChangeView{r.time, r.device, "group 20", "type", "DMA-FQ", "identity", "nvme pair"}));
}

TEST(BusView, OnlyAViewThatDiffersIsAChangeAndRecentActionsKeepTheLast) {
  app::BusView v;
  EXPECT_FALSE(v.take({}));
  bus::HostSummary h;
  h.mode = "DMA";
  EXPECT_TRUE(v.take(h));
  EXPECT_FALSE(v.take(h));
  EXPECT_EQ(v.host().mode, "DMA");
  std::vector<bus::Action> actions;
  for (size_t i = 0; i < bus::kRecentActions + 3; ++i) actions.push_back({"t", "done", "", std::to_string(i)});
  v.acted(actions);
  auto recent = v.recent();
  ASSERT_EQ(recent.size(), bus::kRecentActions);
  EXPECT_EQ(recent.front().message, "3");
  EXPECT_EQ(recent.back().message, std::to_string(bus::kRecentActions + 2));
}

TEST(DaemonExports, TargetsFollowTheConfigurationAndAReloadDropsWhatMoved) {
  config::DaemonConfig c;
  c.prometheus = true;
  c.prometheusDirectory = "/var/lib/node_exporter";
  c.nfd = false;
  auto before = app::exportTargets(c);
  EXPECT_EQ(before.prometheusFile, "/var/lib/node_exporter/iommud.prom");
  EXPECT_FALSE(before.nfdFile);
  c.prometheusDirectory = "/run/node_exporter";
  c.nfd = true;
  c.nfdFile = "/etc/kubernetes/node-feature-discovery/features.d/iommud";
  auto now = app::exportTargets(c);
  EXPECT_EQ(app::droppedExports(before, now), std::vector<std::string>{"/var/lib/node_exporter/iommud.prom"});
  EXPECT_TRUE(app::droppedExports(now, now).empty());
}

TEST(DaemonExports, AnErrorIsSaidOncePerReasonAndTheRecoveryOnce) {
  app::ExportErrors e;
  EXPECT_FALSE(e.note("/p", ""));  // written, as expected
  auto first = e.note("/p", "/p: Permission denied");
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->warning);
  EXPECT_FALSE(e.note("/p", "/p: Permission denied"));
  auto other = e.note("/p", "/p: No space left on device");
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->warning);
  auto back = e.note("/p", "");
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->warning);
  EXPECT_EQ(back->message, "fleet export: /p is written again");
  EXPECT_FALSE(e.note("/p", ""));
  EXPECT_TRUE(e.note("/q", "/q: Permission denied"));
  e.forget("/q");
  EXPECT_TRUE(e.note("/q", "/q: Permission denied"));  // a file dropped and configured again
}

// A reload that moves the Prometheus file removes the old one (what it says would grow stale) and
// leaves the one still configured; the configuration is the daemon's, replaced in place.
TEST(DaemonExports, AReloadRemovesTheFileItMovedAndKeepsTheOthers) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("iommud-exports-" + std::to_string(::getpid()));
  fs::create_directories(dir / "old");
  fs::create_directories(dir / "new");
  config::DaemonConfig c;
  c.prometheus = true;
  c.prometheusDirectory = (dir / "old").string();
  c.nfd = true;
  c.nfdFile = (dir / "nfd").string();
  adapters::systemd::Log log{adapters::systemd::Log::Target::Stderr, adapters::systemd::Priority::Err};
  app::DaemonExports exports{c, log};
  for (const auto& f : {dir / "old" / "iommud.prom", dir / "nfd"}) std::ofstream(f) << "x\n";
  const auto before = exports.targets();
  c.prometheusDirectory = (dir / "new").string();  // the reload
  exports.reloaded(before);
  EXPECT_FALSE(fs::exists(dir / "old" / "iommud.prom"));
  EXPECT_TRUE(fs::exists(dir / "nfd"));
  EXPECT_EQ(exports.targets().prometheusFile, (dir / "new" / "iommud.prom").string());
  exports.reloaded(exports.targets());  // nothing moved, nothing goes (and a missing file is no error)
  EXPECT_TRUE(fs::exists(dir / "nfd"));
  fs::remove_all(dir);
}

}  // namespace daemon_parts_test
