// iommuctl verify: records judged against what the host shows (the pure comparison), the values
// read from a synthetic root, and the text and JSON that name the drift.
#include "app/host/verify.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/change/current_values.hpp"
#include "app/report/verify_report.hpp"
#include "support/fake_host.hpp"

namespace verify_test {

using namespace iommud;
using namespace iommud::testing;
using core::ChangeKind;
using State = app::Verified::State;
using Seen = app::Observed::State;

app::ChangeRecord domainRecord(const std::string& device, int group, const std::string& written) {
  app::ChangeRecord r;
  r.kind = ChangeKind::Domain;
  r.device = device;
  r.group = group;
  r.object = "group " + std::to_string(group);
  r.key = "type";
  r.original = "DMA-FQ";
  r.written = written;
  r.rule = "nvme-identity";
  r.ruleWhere = "/etc/iommud/policies.d/nvme.toml:3:1";
  r.time = "2026-11-21T12:00:00Z";
  return r;
}

app::ChangeRecord paramRecord(const std::string& object, const std::string& written) {
  app::ChangeRecord r;
  r.kind = ChangeKind::ModuleParam;
  r.object = object;
  r.key = object.substr(object.find('.') + 1);
  r.original = "0";
  r.written = written;
  r.time = "2026-11-21T12:00:01Z";
  return r;
}

app::ChangeRecord ringsRecord(const std::string& device, const std::string& netdev) {
  app::ChangeRecord r;
  r.kind = ChangeKind::Rings;
  r.device = device;
  r.object = netdev;
  r.key = "rx";
  r.original = "1024";
  r.written = "4096";
  r.time = "2026-11-21T12:00:02Z";
  r.ifindex = 2;
  return r;
}

app::Observed value(const std::string& v) {
  return {Seen::Value, v, ""};
}

TEST(VerifyRecords, SameValueIsAsRecordedAnotherIsDriftWithBoth) {
  auto results =
      app::verifyRecords({domainRecord("0000:03:00.0", 14, "identity"), domainRecord("0000:04:00.0", 15, "identity")},
                         {value("identity\n"), value("DMA-FQ\n")});
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].state, State::AsRecorded);
  EXPECT_EQ(results[0].now, "identity");
  EXPECT_EQ(results[1].state, State::Drifted);
  EXPECT_EQ(results[1].now, "DMA-FQ");
  EXPECT_EQ(results[1].record.written, "identity");
  EXPECT_EQ(app::verifyExitStatus(results), 3);
}

TEST(VerifyRecords, ParametersCompareAsTheKernelPrintsThem) {
  // A boolean parameter written as 1 reads Y.
  auto results = app::verifyRecords({paramRecord("nvme.use_threaded_interrupts", "1")}, {value("Y\n")});
  EXPECT_EQ(results[0].state, State::AsRecorded);
  EXPECT_EQ(app::verifyExitStatus(results), 0);
}

TEST(VerifyRecords, ModprobeFileComparesWholeText) {
  app::ChangeRecord r;
  r.kind = ChangeKind::ModprobeConf;
  r.object = "/etc/modprobe.d/iommud-nvme.conf";
  r.key = "(file)";
  r.written = "options nvme poll_queues=4\n";
  EXPECT_EQ(app::verifyRecords({r}, {value("options nvme poll_queues=4\n")})[0].state, State::AsRecorded);
  EXPECT_EQ(app::verifyRecords({r}, {value("options nvme poll_queues=4\n# mine\n")})[0].state, State::Drifted);
}

TEST(VerifyRecords, GoneAndUncheckedKeepWhy) {
  auto results = app::verifyRecords(
      {domainRecord("0000:03:00.0", 14, "identity"), ringsRecord("0000:05:00.0", "enp5s0")},
      {{Seen::Gone, "", "device 0000:03:00.0 was removed"}, {Seen::Unreadable, "", "not from a --root"}});
  EXPECT_EQ(results[0].state, State::Gone);
  EXPECT_EQ(results[0].why, "device 0000:03:00.0 was removed");
  EXPECT_EQ(results[1].state, State::Unchecked);
  EXPECT_EQ(results[1].why, "not from a --root");
  EXPECT_EQ(app::verifyExitStatus(results), 3);  // gone is drift
}

TEST(VerifyRecords, ExitStatusSaysWhatWasFound) {
  const auto rec = domainRecord("0000:03:00.0", 14, "identity");
  EXPECT_EQ(app::verifyExitStatus({}), 0);
  EXPECT_EQ(app::verifyExitStatus(app::verifyRecords({rec}, {value("identity")})), 0);
  // Nothing drifted, but one could not be checked: not the success status.
  EXPECT_EQ(app::verifyExitStatus(app::verifyRecords({rec, ringsRecord("0000:05:00.0", "enp5s0")},
                                                     {value("identity"), {Seen::Unreadable, "", "no ethtool"}})),
            4);
  EXPECT_EQ(app::verifyExitStatus(app::verifyRecords({rec}, {value("DMA")})), 3);
}

TEST(ObserveRecords, ReadsTheRootAndNamesWhatIsGone) {
  FakeHost h;
  h.pci({.address = "0000:03:00.0", .parent = "", .classCode = 0x010802, .driver = "nvme"});
  h.pci({.address = "0000:05:00.0", .parent = "", .classCode = 0x020000, .driver = "ixgbe"});
  h.netdev("0000:05:00.0", {.name = "enp5s0", .ifindex = 2});
  h.group(14, "identity\n", {"0000:03:00.0"});
  h.write("/sys/module/nvme/parameters/poll_queues", "4\n");
  adapters::sysfs::Root root(h.rootString());
  const std::vector<app::ChangeRecord> records = {
      domainRecord("0000:03:00.0", 14, "identity"), paramRecord("nvme.poll_queues", "4"),
      paramRecord("ixgbe.allow_unsupported_sfp", "1"), ringsRecord("0000:05:00.0", "enp5s0")};
  auto seen = app::observeRecords(root, records, nullptr, "no ethtool here");
  ASSERT_EQ(seen.size(), 4U);
  EXPECT_EQ(seen[0].state, Seen::Value);
  EXPECT_EQ(seen[0].value, "identity\n");
  EXPECT_EQ(seen[1].value, "4\n");
  EXPECT_EQ(seen[2].state, Seen::Gone);
  EXPECT_EQ(seen[2].why, "module ixgbe is not loaded");
  EXPECT_EQ(seen[3].state, Seen::Unreadable);
  EXPECT_EQ(seen[3].why, "no ethtool here");

  std::filesystem::remove(h.root() / "sys/bus/pci/devices/0000:03:00.0");
  seen = app::observeRecords(root, records, nullptr, "no ethtool here");
  EXPECT_EQ(seen[0].state, Seen::Gone);
  EXPECT_EQ(seen[0].why, "device 0000:03:00.0 was removed");
}

TEST(VerifyText, NamesTheDriftFirstWithBothValuesAndWhen) {
  auto results = app::verifyRecords({paramRecord("nvme.poll_queues", "4"), domainRecord("0000:03:00.0", 14, "identity"),
                                     ringsRecord("0000:05:00.0", "enp5s0")},
                                    {value("4\n"), value("DMA-FQ\n"), {Seen::Unreadable, "", "no ethtool here"}});
  const std::string text = app::verifyText(results, app::Style{false, 120});
  EXPECT_EQ(text,
            "drifted      0000:03:00.0 group 14 type\n"
            "             set to identity at 2026-11-21T12:00:00Z (rule nvme-identity); the host has DMA-FQ\n"
            "not checked  0000:05:00.0 enp5s0 rings rx\n"
            "             set to 4096 at 2026-11-21T12:00:02Z; not checked: no ethtool here\n"
            "as recorded  nvme.poll_queues\n"
            "             set to 4 at 2026-11-21T12:00:01Z\n"
            "\n"
            "3 changes iommud recorded: 1 drifted, 1 not checked, 1 as recorded\n");
  EXPECT_EQ(app::verifyText({}, app::Style{false, 120}),
            "iommud has recorded no change on this host: nothing to verify.\n");
}

TEST(VerifyJson, EachRecordWithItsStateAndValues) {
  auto results =
      app::verifyRecords({domainRecord("0000:03:00.0", 14, "identity"), paramRecord("nvme.poll_queues", "4")},
                         {value("DMA-FQ\n"), {Seen::Gone, "", "module nvme is not loaded"}});
  auto j = nlohmann::json::parse(app::verifyJson(results));
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["summary"]["drifted"], 1);
  EXPECT_EQ(j["summary"]["gone"], 1);
  EXPECT_EQ(j["summary"]["as_recorded"], 0);
  ASSERT_EQ(j["records"].size(), 2U);
  EXPECT_EQ(j["records"][0]["state"], "drifted");
  EXPECT_EQ(j["records"][0]["device"], "0000:03:00.0");
  EXPECT_EQ(j["records"][0]["group"], 14);
  EXPECT_EQ(j["records"][0]["set"], "identity");
  EXPECT_EQ(j["records"][0]["now"], "DMA-FQ");
  EXPECT_EQ(j["records"][0]["set_at"], "2026-11-21T12:00:00Z");
  EXPECT_TRUE(j["records"][0]["why"].is_null());
  EXPECT_EQ(j["records"][1]["state"], "gone");
  EXPECT_TRUE(j["records"][1]["now"].is_null());
  EXPECT_EQ(j["records"][1]["why"], "module nvme is not loaded");
}

}  // namespace verify_test
