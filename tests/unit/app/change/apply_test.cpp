// Apply and revert over a synthetic root with the fake kernel behind the sysfs writer and a fake
// ethtool: what counts is what the root reads afterwards and what the records say.
#include "app/change/apply.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <tuple>

#include "adapters/state/atomic_file.hpp"
#include "app/change/planning.hpp"
#include "app/change/reconcile.hpp"
#include "app/change/record_store.hpp"
#include "app/report/plan_report.hpp"
#include "config/policy_loader.hpp"
#include "support/fake_kernel.hpp"
#include "support/scenarios.hpp"
#include "support/unique_fd.hpp"
#include "unit/app/change/apply_bench.hpp"
#include "unit/crash_sweep.hpp"
#include "unit/test_host.hpp"

namespace apply_test {

using namespace iommud;
using namespace iommud::testing;
using namespace iommud::testing::crash_sweep;
using core::ChangeKind;
using R = app::Outcome::Result;

namespace fs = std::filesystem;

constexpr const char* kAtlanticMaxRx = R"(
[[rule]]
name = "rings"
description = "big rings"
[rule.match]
driver = "atlantic"
[rule.rings]
rx = "max"
)";

TEST(Apply, SetsAGroupTypeRecordsItAndRevertRestoresIt) {
  Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
  auto applied = b.apply(rules(kNvmeIdentity));
  ASSERT_EQ(count(applied, R::Done), 1) << describe(applied);
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "identity\n");
  auto records = app::readRecords(b.root, b.ctx.paths);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].original, "DMA-FQ");
  EXPECT_EQ(records[0].written, "identity");
  EXPECT_EQ(records[0].rule, "nvme-identity");
  EXPECT_EQ(records[0].time, "2026-11-21T12:00:00Z");
  // Status says what iommud changed, when and by which rule.
  auto st = b.status();
  st.changes = app::readRecords(b.root, b.ctx.paths);
  const std::string text = app::statusText(st, false);
  EXPECT_NE(text.find("2026-11-21T12:00:00Z group 20 type: DMA-FQ -> identity"), std::string::npos) << text;
  EXPECT_NE(text.find("by rule nvme-identity (test.toml:"), std::string::npos) << text;
  EXPECT_NE(app::statusJson(st).find(R"("rule": "nvme-identity")"), std::string::npos);
  // Applying again changes nothing: the plan is a diff.
  EXPECT_TRUE(b.apply(rules(kNvmeIdentity)).empty());

  auto reverted = b.revert();
  ASSERT_EQ(count(reverted, R::Done), 1) << describe(reverted);
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "DMA-FQ\n");
  EXPECT_EQ(b.status().host.device("0000:03:00.0")->driver, "nvme");
  EXPECT_TRUE(app::readRecords(b.root, b.ctx.paths).empty());
}

// The case Debian's 6.1 showed (tests/vm, apply): DMA -> DMA-FQ for a group of several devices is
// refused with EINVAL before 6.4, live or not. What the planner plans, apply must do, on every
// version; what the kernel would refuse is a skip with the reason.
TEST(Apply, DoesEveryDmaFqChangeItPlansOnEveryKernelVersion) {
  for (const auto& [debian, version, multi] : {std::tuple{"5.15.100-1", core::KernelVersion{5, 15, 100}, false},
                                               std::tuple{"6.1.140-1", core::KernelVersion{6, 1, 140}, false},
                                               std::tuple{"6.4.4-1", core::KernelVersion{6, 4, 4}, true},
                                               std::tuple{"6.12.48-1", core::KernelVersion{6, 12, 48}, true}}) {
    SCOPED_TRACE(debian);
    auto h = twoNvmeOneGroup(debian);
    h->write("/sys/kernel/iommu_groups/20/type", "DMA\n");  // booted strict
    Bench b(std::move(h), version);
    auto s = b.status();
    auto planned = core::plan({s.host, s.mode, s.findings}, rules(kNvmeLazy), {});
    auto applied = b.apply(rules(kNvmeLazy), core::Trigger::Coldplug);
    EXPECT_EQ(count(applied, R::Failed), 0) << describe(applied);
    EXPECT_EQ(count(applied, R::Done), multi ? 1 : 0) << describe(applied);
    EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), multi ? "DMA-FQ\n" : "DMA\n");
    EXPECT_EQ(b.status().host.device("0000:03:00.0")->driver, "nvme");
    if (!multi) {
      ASSERT_EQ(planned.skips.size(), 1U);
      EXPECT_EQ(planned.skips[0].reason, core::SkipReason::KernelTooOld);
      EXPECT_NE(planned.skips[0].message.find("holds 6 devices"), std::string::npos) << planned.skips[0].message;
    }
  }
}

TEST(Apply, RevertLeavesAValueSomethingElseChangedAndSaysSo) {
  Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
  ASSERT_EQ(count(b.apply(rules(kNvmeIdentity)), R::Done), 1);
  b.host->write("/sys/kernel/iommu_groups/20/type", "DMA\n");  // another tool was here
  auto reverted = b.revert();
  ASSERT_EQ(count(reverted, R::Drift), 1) << describe(reverted);
  EXPECT_NE(reverted[0].message.find("not the identity iommud wrote"), std::string::npos) << reverted[0].message;
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "DMA\n");
  EXPECT_EQ(app::readRecords(b.root, b.ctx.paths).size(), 1U);  // still known, still drifted
}

TEST(Apply, ARefusalOfTheKernelIsReportedAndNothingIsRecorded) {
  Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
  b.kernel.requireType("0000:03:00.0", "DMA");
  auto applied = b.apply(rules(kNvmeIdentity));
  ASSERT_EQ(count(applied, R::Failed), 1) << describe(applied);
  EXPECT_NE(applied[0].message.find("rolled back"), std::string::npos) << applied[0].message;
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "DMA-FQ\n");
  EXPECT_TRUE(app::readRecords(b.root, b.ctx.paths).empty());
}

TEST(Apply, WritesRuntimeParametersAndModprobeFilesAndRevertsBoth) {
  Bench b(thunderboltNicWithModule(), {6, 12, 30});
  auto applied = b.apply(rules(kAtlanticItr));
  ASSERT_EQ(count(applied, R::Done), 2) << describe(applied);
  EXPECT_EQ(b.read("/sys/module/atlantic/parameters/aq_itr"), "0\n");
  const std::string conf = b.read("/etc/modprobe.d/iommud-atlantic.conf");
  EXPECT_NE(conf.find("# Written by iommud"), std::string::npos) << conf;
  EXPECT_NE(conf.find("# rule itr (test.toml:"), std::string::npos) << conf;
  EXPECT_NE(conf.find("options atlantic aq_itr_rx=64\n"), std::string::npos) << conf;

  auto reverted = b.revert();
  ASSERT_EQ(count(reverted, R::Done), 2) << describe(reverted);
  EXPECT_EQ(b.read("/sys/module/atlantic/parameters/aq_itr"), "65535\n");
  EXPECT_EQ(b.read("/etc/modprobe.d/iommud-atlantic.conf"), "(absent)");
}

// A modprobe.d file whose text is not UTF-8 (a comment in Latin-1) cannot be recorded as it is, for
// a records file is JSON: its change is not made, the file keeps its bytes, and the other change
// and the records files go on as usual (the record was never written with its bytes changed, and
// nothing throws out of the store).
TEST(Apply, AModprobeFileThatIsNotUtf8IsNotOverwrittenForItCouldNotBeRecorded) {
  Bench b(thunderboltNicWithModule(), {6, 12, 30});
  const std::string latin1 = "# caf\xe9: mine\noptions atlantic aq_itr_rx=0\n";
  const std::string conf = b.root.hostPath("/etc/modprobe.d/iommud-atlantic.conf");
  std::filesystem::create_directories(std::filesystem::path(conf).parent_path());
  std::ofstream(conf, std::ios::binary) << latin1;
  auto applied = b.apply(rules(kAtlanticItr));
  ASSERT_EQ(count(applied, R::Done), 1) << describe(applied);
  ASSERT_EQ(count(applied, R::Failed), 2) << describe(applied);  // the record, and the change not made
  EXPECT_NE(describe(applied).find("cannot record: /var/lib/iommud/changes.json: the record of "
                                   "/etc/modprobe.d/iommud-atlantic.conf holds text that is not UTF-8"),
            std::string::npos)
      << describe(applied);
  EXPECT_NE(describe(applied).find("not made: its record could not be written first"), std::string::npos)
      << describe(applied);
  EXPECT_EQ(b.read("/etc/modprobe.d/iommud-atlantic.conf"), latin1);
  EXPECT_EQ(b.read("/sys/module/atlantic/parameters/aq_itr"), "0\n");
  auto view = app::readRecordsView(b.root, b.ctx.paths);
  EXPECT_TRUE(view.damage.empty());
  ASSERT_EQ(view.records.size(), 1U);
  EXPECT_EQ(view.records[0].kind, core::ChangeKind::ModuleParam);
  auto reverted = b.revert();
  ASSERT_EQ(count(reverted, R::Done), 1) << describe(reverted);
  EXPECT_EQ(b.read("/sys/module/atlantic/parameters/aq_itr"), "65535\n");
  EXPECT_EQ(b.read("/etc/modprobe.d/iommud-atlantic.conf"), latin1);
}

// A reboot clears /run/iommud (tmpfs) and undoes every runtime change with it; /var/lib/iommud
// stays. Revert then restores what the state directory records (the modprobe.d file) and says,
// one line each, which runtime changes the reboot undid, instead of saying nothing about them.
TEST(Apply, RevertAfterARebootRestoresWhatVarLibRecordsAndSaysWhatRunLost) {
  Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
  ASSERT_EQ(count(b.apply(rules(kNvmeIdentity)), R::Done), 1);
  Bench nic(thunderboltNicWithModule(), {6, 12, 30});
  ASSERT_EQ(count(nic.apply(rules(kAtlanticItr)), R::Done), 2);
  for (auto* bench : {&b, &nic}) {
    fs::remove_all(bench->root.hostPath(bench->ctx.paths.runDir));  // the reboot
    ASSERT_TRUE(fs::exists(bench->root.hostPath(bench->ctx.paths.stateDir)));
  }
  // The kernel starts from its defaults again.
  b.host->write("/sys/kernel/iommu_groups/20/type", "DMA-FQ\n");
  nic.host->write("/sys/module/atlantic/parameters/aq_itr", "65535\n");

  auto group = b.revert();
  ASSERT_EQ(group.size(), 1U) << describe(group);
  EXPECT_EQ(group[0].result, R::Lost);
  EXPECT_EQ(group[0].message,
            "group 20 type DMA-FQ -> identity (rule nvme-identity, 2026-11-21T12:00:00Z): /run/iommud no longer "
            "records it (a reboot cleared it), and the kernel started again from its own value: nothing to "
            "restore; iommuctl status shows the value now");
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "DMA-FQ\n");

  auto reverted = nic.revert();
  ASSERT_EQ(count(reverted, R::Done), 1) << describe(reverted);
  ASSERT_EQ(count(reverted, R::Lost), 1) << describe(reverted);
  EXPECT_EQ(nic.read("/etc/modprobe.d/iommud-atlantic.conf"), "(absent)");
  for (const auto& o : reverted) {
    if (o.result == R::Lost) {
      EXPECT_TRUE(o.message.starts_with("atlantic.aq_itr 65535 -> 0 (rule itr, ")) << o.message;
    }
  }
  // Said once: the records are gone now, and a second revert has nothing to say.
  EXPECT_TRUE(b.revert().empty());
  EXPECT_TRUE(nic.revert().empty());
  EXPECT_TRUE(app::readRecords(nic.root, nic.ctx.paths).empty());
}

// Without a reboot the copy in the state directory matches /run: nothing is said to be lost.
TEST(Apply, RevertWithoutARebootReportsNothingLost) {
  Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
  ASSERT_EQ(count(b.apply(rules(kNvmeIdentity)), R::Done), 1);
  ASSERT_EQ(count(b.apply(rules(kNvmeIdentity)), R::Done), 0);  // a second round: the copy is rewritten
  auto reverted = b.revert();
  EXPECT_EQ(count(reverted, R::Lost), 0) << describe(reverted);
  EXPECT_EQ(count(reverted, R::Done), 1) << describe(reverted);
}

std::string itrRule(int value) {
  return "[[rule]]\nname = \"itr\"\ndescription = \"interrupt moderation\"\n[rule.match]\ndriver = "
         "\"atlantic\"\n[[rule.param]]\nname = \"aq_itr\"\nvalue = " +
         std::to_string(value) + "\n";
}

// A file as it is now, held open: "replaced" once its path names another inode. Held, its inode
// cannot be freed, so the file written in its place cannot take its number (a filesystem may
// give a freed inode number to the next file it creates).
class HeldFile {
 public:
  explicit HeldFile(std::string path) : path_(std::move(path)), fd_(::open(path_.c_str(), O_RDONLY | O_CLOEXEC)) {}
  [[nodiscard]] bool exists() const { return static_cast<bool>(fd_); }
  [[nodiscard]] bool replaced() const {
    struct stat held {};
    struct stat now {};
    return ::fstat(fd_.get(), &held) == 0 && (::stat(path_.c_str(), &now) != 0 || now.st_ino != held.st_ino);
  }

 private:
  std::string path_;
  support::UniqueFd fd_;
};

// Each apply rewrites only the record files whose text changes (each write is an atomic rename,
// so a new inode): the state directory's records, synced at every write (an fsync on disk costs
// milliseconds, at every hotplug), stay as they were when only a runtime value changed; a damaged
// file is written again.
TEST(Apply, RewritesOnlyTheRecordFilesWhoseTextChanges) {
  Bench b(thunderboltNicWithModule(), {6, 12, 30});
  ASSERT_EQ(count(b.apply(rules(kAtlanticItr)), R::Done), 2);  // aq_itr at runtime, aq_itr_rx in modprobe.d
  const std::string files[] = {b.root.hostPath(b.ctx.paths.runDir + "/changes.json"),
                               b.root.hostPath(b.ctx.paths.stateDir + "/changes.json"),
                               b.root.hostPath(b.ctx.paths.stateDir + "/runtime-changes.json")};
  auto hold = [&files] { return std::array<HeldFile, 3>{HeldFile(files[0]), HeldFile(files[1]), HeldFile(files[2])}; };
  const auto first = hold();
  for (const auto& f : first) ASSERT_TRUE(f.exists());

  ASSERT_EQ(count(b.apply(rules(kAtlanticItr)), R::Done), 0);  // nothing to change: nothing written
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(first[i].replaced()) << files[i];

  // Damaged files: /run's and the unsynced copy, which a crash may leave empty. Both are written
  // again, whole (what they held is lost: they hold none now); the state directory's stays.
  std::ofstream(files[0], std::ios::trunc) << "{not json";
  std::ofstream(files[2], std::ios::trunc) << "";
  ASSERT_EQ(count(b.apply(rules(kAtlanticItr)), R::Done), 0);
  EXPECT_TRUE(first[0].replaced());
  EXPECT_EQ(b.read(b.ctx.paths.runDir + "/changes.json"), "[]\n");
  EXPECT_TRUE(first[2].replaced());
  EXPECT_EQ(b.read(b.ctx.paths.stateDir + "/runtime-changes.json"), "[]\n");
  EXPECT_FALSE(first[1].replaced());

  const auto second = hold();
  ASSERT_EQ(count(b.apply(rules(itrRule(100))), R::Done), 1);  // the runtime value alone
  EXPECT_TRUE(second[0].replaced());
  EXPECT_FALSE(first[1].replaced());
  EXPECT_TRUE(second[2].replaced());
  EXPECT_EQ(app::readRecords(b.root, b.ctx.paths).size(), 2U);
}

// The state directory's copy of /run's records is written once, at the end of an apply, however
// many saves of /run's records the changes take (each change is recorded before it is made and
// settled after): on disk each write of a file costs a rename, which on a filesystem mounted with
// `discard` waits for the old file's blocks to be discarded.
TEST(Apply, WritesTheCopyOfTheRuntimeRecordsOnceAnApply) {
  Bench b(thunderboltNicWithModule(), {6, 12, 30});
  std::vector<std::string> saves;
  b.ctx.hooks.afterStep = [&saves](std::string_view what) {
    if (what.starts_with("save ")) saves.emplace_back(what);
  };
  ASSERT_EQ(count(b.apply(rules(kAtlanticItr)), R::Done), 2);
  const std::string run = "save " + b.ctx.paths.runDir + "/changes.json";
  const std::string copy = "save " + b.ctx.paths.stateDir + "/runtime-changes.json";
  EXPECT_EQ(std::count(saves.begin(), saves.end(), run), 2) << ::testing::PrintToString(saves);  // intent, outcome
  ASSERT_EQ(std::count(saves.begin(), saves.end(), copy), 1) << ::testing::PrintToString(saves);
  EXPECT_EQ(saves.back(), copy);
  EXPECT_EQ(b.read(b.ctx.paths.stateDir + "/runtime-changes.json"), b.read(b.ctx.paths.runDir + "/changes.json"));
}

TEST(Apply, ASettingChangedAgainKeepsOneRecordWithTheValueFirstFound) {
  Bench b(thunderboltNicWithModule(), {6, 12, 30});
  ASSERT_EQ(count(b.apply(rules(itrRule(0))), R::Done), 1);
  ASSERT_EQ(count(b.apply(rules(itrRule(100))), R::Done), 1);  // a reloaded policy, say
  EXPECT_EQ(app::readRecords(b.root, b.ctx.paths).size(), 1U);
  auto reverted = b.revert();
  ASSERT_EQ(count(reverted, R::Done), 1) << describe(reverted);
  EXPECT_EQ(b.read("/sys/module/atlantic/parameters/aq_itr"), "65535\n");
}

TEST(Apply, ASettingSomethingElseChangedInBetweenIsRecordedFromThatValue) {
  Bench b(thunderboltNicWithModule(), {6, 12, 30});
  ASSERT_EQ(count(b.apply(rules(itrRule(0))), R::Done), 1);
  ASSERT_TRUE(b.kernel.write("/sys/module/atlantic/parameters/aq_itr", "7"));  // an admin, by hand
  ASSERT_EQ(count(b.apply(rules(itrRule(0))), R::Done), 1);
  ASSERT_EQ(app::readRecords(b.root, b.ctx.paths).size(), 1U);
  EXPECT_EQ(app::readRecords(b.root, b.ctx.paths).front().original, "7");
  ASSERT_EQ(count(b.revert(), R::Done), 1);
  EXPECT_EQ(b.read("/sys/module/atlantic/parameters/aq_itr"), "7\n");
}

TEST(Apply, SaysWhenTheInitramfsOfAModprobeLinesModuleCouldNotBeChecked) {
  auto h = thunderboltNicWithModule();
  h->write("/boot/initrd.img-6.12.38+deb12-amd64", "not a cpio archive\n");
  Bench b(std::move(h), {6, 12, 30});
  auto applied = b.apply(rules(kAtlanticItr));
  ASSERT_EQ(count(applied, R::Done), 2) << describe(applied);
  const std::string& modprobe = applied[1].message;
  EXPECT_NE(modprobe.find("/etc/modprobe.d/iommud-atlantic.conf: aq_itr_rx=64 (takes effect when atlantic "
                          "is next loaded (reload the module); the initramfs "
                          "/boot/initrd.img-6.12.38+deb12-amd64 could not be checked for atlantic ("),
            std::string::npos)
      << modprobe;
  EXPECT_NE(modprobe.find("until `update-initramfs -u -k 6.12.38+deb12-amd64` rebuilds it)"), std::string::npos)
      << modprobe;
}

TEST(Apply, SetsRingsThroughEthtoolAndRevertRestoresThem) {
  Bench b(thunderboltNic(), {6, 12, 30});
  b.ethtool.values = {{{ChangeKind::Rings, "rx"}, 2048}, {{ChangeKind::Rings, "tx"}, 4096}};
  auto applied = b.apply(rules(kAtlanticMaxRx));
  ASSERT_EQ(count(applied, R::Done), 1) << describe(applied);
  EXPECT_EQ((b.ethtool.values[{ChangeKind::Rings, "rx"}]), 8184U);
  b.ethtool.values[{ChangeKind::Rings, "tx"}] = 512;  // not ours: revert leaves it
  auto reverted = b.revert();
  ASSERT_EQ(count(reverted, R::Done), 1) << describe(reverted);
  EXPECT_EQ((b.ethtool.values[{ChangeKind::Rings, "rx"}]), 2048U);
  EXPECT_EQ((b.ethtool.values[{ChangeKind::Rings, "tx"}]), 512U);
}

// e1000e keeps rx-usecs as an ITR with steps of 4 (seen on Debian's 6.12 in tests/vm adapters):
// 7000 is taken and reads back 7142. iommud reports it failed and puts the old value back.
TEST(Apply, PutsTheOldValueBackWhenTheDriverKeepsAnotherOne) {
  Bench b(thunderboltNic(), {6, 12, 30});
  b.ethtool.values = {{{ChangeKind::Coalesce, "rx-usecs"}, 3}};
  b.ethtool.rounds = [](uint32_t v) { return v > 4 ? 1000000 / ((1000000 / v) & ~3U) : v; };
  auto applied = b.apply(rules(R"(
[[rule]]
name = "usecs"
description = "slow interrupts"
[rule.match]
driver = "atlantic"
[rule.coalesce]
rx-usecs = 7000
)"),
                         core::Trigger::Hotplug);
  ASSERT_EQ(count(applied, R::Failed), 1) << describe(applied);
  EXPECT_NE(describe(applied).find("set 7000 but the driver reads back 7142; put 3 back"), std::string::npos)
      << describe(applied);
  EXPECT_EQ((b.ethtool.values[{ChangeKind::Coalesce, "rx-usecs"}]), 3U);
  EXPECT_TRUE(app::readRecords(b.root, b.ctx.paths).empty());
}

TEST(Apply, NamesAnotherProgramThatSetsTheSameNicValue) {
  Bench b(thunderboltNic(), {6, 12, 30});
  b.host->write("/etc/NetworkManager/system-connections/tb.nmconnection",
                "[connection]\nid=tb\ntype=ethernet\ninterface-name=enp5s0\n[ethtool]\nring-rx=1024\n");
  std::filesystem::permissions(b.host->root() / "etc/NetworkManager/system-connections/tb.nmconnection",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  b.ethtool.values = {{{ChangeKind::Rings, "rx"}, 2048}};
  auto applied = b.apply(rules(kAtlanticMaxRx));
  ASSERT_EQ(count(applied, R::Done), 1) << describe(applied);
  EXPECT_NE(applied[0].message.find("NetworkManager also sets it (rx=1024 in "), std::string::npos)
      << applied[0].message;
  b.ethtool.values[{ChangeKind::Rings, "rx"}] = 1024;  // NetworkManager reactivated the profile
  auto reverted = b.revert();
  ASSERT_EQ(count(reverted, R::Drift), 1) << describe(reverted);
  EXPECT_NE(reverted[0].message.find("NetworkManager also sets it"), std::string::npos) << reverted[0].message;
}

TEST(Apply, AdviceIsReportedAndChangesNothing) {
  Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
  auto applied = b.apply(rules(R"(
[[rule]]
name = "nvme-identity"
description = "identity for NVMe, advice only"
mode = "advise"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
)"));
  ASSERT_EQ(count(applied, R::Advised), 1) << describe(applied);
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "DMA-FQ\n");
  EXPECT_TRUE(b.kernel.log().empty());
}

// What reconcile's second round is decided by, and what the journal names a group's devices from:
// fields of the outcome, never its words.
TEST(Apply, ASettingOfAGroupJustReboundWaitsForTheNextRoundAndTheDomainChangeNamesItsMembers) {
  auto h = thunderboltNic();
  for (int g : {15, 16, 17}) h->write("/sys/kernel/iommu_groups/" + std::to_string(g) + "/type", "DMA-FQ\n");
  Bench b(std::move(h), {6, 12, 30});
  b.ethtool.values = {{{ChangeKind::Rings, "rx"}, 2048}, {{ChangeKind::Rings, "tx"}, 4096}};
  auto applied = b.apply(rules(std::string(kAtlanticMaxRx) + R"(
[[rule]]
name = "strict"
description = "strict for the NIC"
domain = "DMA"
[rule.match]
driver = "atlantic"
)"));
  ASSERT_EQ(count(applied, R::Kept), 1) << describe(applied);
  for (const auto& o : applied) {
    EXPECT_EQ(o.nextRound, o.result == R::Kept) << o.message;
    if (o.kind == ChangeKind::Domain) {
      EXPECT_FALSE(o.members.empty()) << o.message;
      EXPECT_NE(std::find(o.members.begin(), o.members.end(), o.device), o.members.end()) << o.message;
    } else {
      EXPECT_TRUE(o.members.empty()) << o.message;
    }
  }
}

// The transaction judges the group as sysfs has it when it acts, not as the plan saw it: between
// plan and act a member gets SR-IOV VFs, becomes untrusted, or the whole group goes away.
TEST(Apply, TheTransactionJudgesTheGroupAsItIsWhenItActsNotAsPlanned) {
  struct Case {
    const char* name;
    std::function<void(Bench&)> meanwhile;
    R result;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"VFs enabled", [](Bench& b) { b.host->write("/sys/bus/pci/devices/0000:03:00.0/sriov_numvfs", "4\n"); },
       R::Refused, "0000:03:00.0) must never be unbound: 4 SR-IOV virtual functions enabled"},
      {"untrusted", [](Bench& b) { b.host->write("/sys/bus/pci/devices/0000:04:00.0/removable", "removable\n"); },
       R::Refused, "is untrusted (removable, below an external-facing port)"},
      {"gone",
       [](Bench& b) {
         const auto before = b.status();
         for (const auto& a : before.host.group(20)->devices) b.kernel.removeDevice(a);
       },
       R::Skipped, "group 20 is gone"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
    auto s = b.status();
    core::PlanOptions o;
    o.trigger = core::Trigger::Hotplug;
    auto plan = core::plan({s.host, s.mode, s.findings}, rules(kNvmeIdentity), o);
    ASSERT_EQ(plan.changes.size(), 1U);
    c.meanwhile(b);
    auto applied = app::applyPlan(plan, s.host, b.ctx);
    EXPECT_TRUE(b.kernel.log().empty()) << "nothing may be unbound or written: " << describe(applied);
    if (applied.size() != 1U) {
      ADD_FAILURE() << describe(applied);
      continue;  // the other cases still say what they do
    }
    EXPECT_EQ(applied[0].result, c.result) << describe(applied);
    EXPECT_NE(applied[0].message.find(c.says), std::string::npos) << applied[0].message;
    EXPECT_TRUE(app::readRecords(b.root, b.ctx.paths).empty());
  }
}

// --- every kill point of apply and revert, enumerated ---
//
// A process killed at a step is modelled by an exception thrown at that step and caught only by
// the test: nothing of the Session in memory survives it, what is on disk and in the (fake) kernel
// does, as after a SIGKILL. The steps are counted, not chosen: every sysfs write and every ethtool
// set (before and after each), every records file and modprobe.d file written (after each), as
// the writer, the ethtool port and ApplyContext::hooks see them. A dry run counts K; then for each
// of the K points a fresh host is killed there, the next writer starts (beginWriting recovers the
// domain transaction), and:
// - every device is bound as at the start;
// - every setting that differs from the start has a record;
// - revert gives back the start exactly: group types, drivers, parameters, modprobe.d, rings.

class KillingEthtool final : public app::EthtoolPort {
 public:
  KillingEthtool(FakeEthtool& inner, KillPoints& points) : inner_(inner), points_(points) {}
  core::Result<uint32_t> get(int i, ChangeKind kind, const std::string& key) override {
    return inner_.get(i, kind, key);
  }
  core::Result<core::Done> set(int i, ChangeKind kind, const std::string& key, uint32_t value) override {
    points_.point();
    if (points_.fails()) return core::Error{EIO, "", "Input/output error (injected)"};
    auto r = inner_.set(i, kind, key, value);
    points_.point();
    return r;
  }

 private:
  FakeEthtool& inner_;
  KillPoints& points_;
};

// What a kill may leave changed: the host's settings (crash_sweep.hpp), and each ethtool value.
std::map<std::string, std::string> settingsOf(const Bench& b) {
  auto out = hostSettings(b.host->root());
  for (const auto& [k, v] : b.ethtool.values) out["ethtool " + k.second] = std::to_string(v);
  return out;
}

struct Sweep {
  std::function<std::unique_ptr<FakeHost>()> host;
  std::function<void(FakeEthtool&)> nic;
  std::string policy;
  bool killRevert = false;  // kill the revert of a plan applied whole, not the apply
};

struct SweepResult {
  int points = 0;                 // kill points, or the host's writes when each fails in turn
  std::vector<std::string> lost;  // per kill point where anything was lost: what
};

// What is done to a run: killed at a point, or a host write failing with EIO, or a step on
// iommud's own files failing with `error` (ENOSPC, EIO); `at` counts from 1, 0: nothing.
struct Fault {
  enum Kind { Kill, HostWrite, OwnFile } kind = Kill;
  int at = 0;
  int error = 0;
  bool lasting = false;  // OwnFile: every step from `at` on fails, until the process ends
};

// One run of the scenario on a fresh host, with `fault`. `seen`, when given: the host's writes
// and the own-file steps of the run without a fault.
SweepResult runOnce(const Sweep& s, Fault fault, std::string* problem, std::pair<int, int>* seen = nullptr) {
  const int killAt = fault.kind == Fault::Kill ? fault.at : 0;
  const int failAt = fault.kind == Fault::HostWrite ? fault.at : 0;
  Bench b(s.host(), {6, 12, 30});
  if (s.nic) s.nic(b.ethtool);
  const auto start = settingsOf(b);
  KillPoints points;
  const OwnFilesFaults faults(points);
  KillingWriter writer(b.kernel, points);
  KillingEthtool ethtool(b.ethtool, points);
  app::ApplyContext ctx{b.root, writer, &ethtool, b.ctx.paths, b.ctx.now, {}};
  ctx.hooks.afterStep = [&](std::string_view) { points.point(); };
  const auto policies = rules(s.policy);
  auto plan = [&] {
    auto st = b.status();
    for (auto& d : st.host.devices) {
      for (auto& n : d.netdevs) {
        n.ethtool.read = !b.ethtool.values.empty();
        for (const auto& [k, v] : b.ethtool.values) n.ethtool.rings[k.second] = v;
        n.ethtool.ringsMax = {{"rx", 8184}, {"tx", 8184}};
      }
    }
    core::PlanOptions o;
    o.trigger = core::Trigger::Hotplug;
    auto p = core::plan({st.host, st.mode, st.findings}, policies, o);
    app::listInitramfsFor(b.root, p, st);
    return std::make_pair(p, st.host);
  };
  if (s.killRevert) {
    auto [p, host] = plan();
    app::applyPlan(p, host, ctx);
  }
  points.killAt = killAt == 0 ? 0 : points.seen + killAt;
  points.failAt = failAt == 0 ? 0 : points.writes + failAt;
  points.ownFailAt = fault.kind == Fault::OwnFile && fault.at != 0 ? points.own + fault.at : 0;
  points.ownErrno = fault.error;
  points.lasting = fault.lasting;
  const int before = points.seen;
  const int writesBefore = points.writes;
  const int ownBefore = points.own;
  try {
    if (s.killRevert) {
      app::revertChanges(std::nullopt, b.status().host, ctx);
    } else {
      auto [p, host] = plan();
      app::applyPlan(p, host, ctx);
    }
  } catch (const Killed&) {
  }
  SweepResult out;
  out.points = fault.at == 0 ? points.seen - before : 0;
  if (seen != nullptr) *seen = {points.writes - writesBefore, points.own - ownBefore};
  // A lasting fault is judged as the process returns, before any restart: nothing a restart
  // would repair may be left to it (a device unbound, a value changed without a record).
  if (fault.lasting) {
    if (auto p = unrecorded(start, settingsOf(b), app::readRecords(b.root, ctx.paths)); !p.empty())
      *problem += "as the process returned:\n" + p;
  }
  points.killAt = 0;
  points.failAt = 0;
  points.ownFailAt = 0;
  points.lasting = false;

  // The next writer: recovery, then what must hold.
  auto session = app::beginWriting(ctx);
  if (!session) {
    *problem = "the next start failed: " + session.error().describe();
    return out;
  }
  *problem += unrecorded(start, settingsOf(b), app::readRecords(b.root, ctx.paths));
  // Revert (the daemon's stop or iommuctl revert) gives back the start.
  auto st = b.status();
  auto reverted = app::revertChanges(std::nullopt, st.host, ctx);
  if (auto d = differences(start, settingsOf(b)); !d.empty()) {
    *problem += "revert did not give back the start:\n" + d + describe(reverted);
  }
  if (!app::readRecords(b.root, ctx.paths).empty()) *problem += "records left after revert\n";
  return out;
}

// Each kill point in turn, or each of the host's writes failing with EIO in turn, or each step on
// iommud's own files failing with `error` in turn.
SweepResult sweep(const Sweep& s, Fault::Kind kind = Fault::Kill, int error = EIO, bool lasting = false) {
  const HostsInMemory inMemory;
  std::string problem;
  SweepResult result;
  std::pair<int, int> seen;
  result.points = runOnce(s, {}, &problem, &seen).points;
  EXPECT_EQ(problem, "") << "without a fault";
  if (kind == Fault::HostWrite) result.points = seen.first;
  if (kind == Fault::OwnFile) result.points = seen.second;
  const char* what = kind == Fault::Kill ? "killed at point " : kind == Fault::HostWrite ? "host write " : "own step ";
  for (int n = 1; n <= result.points; ++n) {
    std::string p;
    runOnce(s, {kind, n, error, lasting}, &p);
    if (!p.empty()) result.lost.push_back(what + std::to_string(n) + ":\n" + p);
  }
  return result;
}

// kAtlanticItr's parameters, and both rings to their maximum.
const std::string kNicEverything = std::string(kAtlanticItr) + "[rule.rings]\nrx = \"max\"\ntx = \"max\"\n";

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s;
  return out;
}

TEST(CrashSweep, ApplyOfTwoDomainChangesLosesNothingAtAnyKillPoint) {
  auto r = sweep({[] { return twoNvmePairs(); }, nullptr, kNvmeIdentity});
  EXPECT_GE(r.points, 12) << "two groups of two drives: unbind, type and bind each, and their records";
  EXPECT_TRUE(r.lost.empty()) << r.lost.size() << " of " << r.points << " kill points lost something:\n"
                              << joined(r.lost);
  std::printf("apply, two domain changes: %d kill points, %zu lost\n", r.points, r.lost.size());
}

TEST(CrashSweep, ApplyOfAParameterAFileAndRingsLosesNothingAtAnyKillPoint) {
  auto nic = [](FakeEthtool& e) { e.values = {{{ChangeKind::Rings, "rx"}, 2048}, {{ChangeKind::Rings, "tx"}, 4096}}; };
  auto r = sweep({[] { return thunderboltNicWithModule(); }, nic, kNicEverything});
  EXPECT_GE(r.points, 6);
  EXPECT_TRUE(r.lost.empty()) << r.lost.size() << " of " << r.points << " kill points lost something:\n"
                              << joined(r.lost);
  std::printf("apply, parameter, modprobe.d and rings: %d kill points, %zu lost\n", r.points, r.lost.size());
}

TEST(CrashSweep, RevertLosesNothingAtAnyKillPoint) {
  auto nic = [](FakeEthtool& e) { e.values = {{{ChangeKind::Rings, "rx"}, 2048}, {{ChangeKind::Rings, "tx"}, 4096}}; };
  for (const auto& s : {Sweep{[] { return twoNvmePairs(); }, nullptr, kNvmeIdentity, true},
                        Sweep{[] { return thunderboltNicWithModule(); }, nic, kNicEverything, true}}) {
    auto r = sweep(s);
    EXPECT_GE(r.points, 4);
    EXPECT_TRUE(r.lost.empty()) << r.lost.size() << " of " << r.points << " kill points lost something:\n"
                                << joined(r.lost);
    std::printf("revert: %d kill points, %zu lost\n", r.points, r.lost.size());
  }
}

// The same scenarios with each of the host's writes (sysfs, ethtool) failing with EIO in turn, the
// process going on: what failed is rolled back or recorded, and revert gives back the start.
TEST(CrashSweep, AWriteThatFailsAtAnyStepLosesNothing) {
  auto nic = [](FakeEthtool& e) { e.values = {{{ChangeKind::Rings, "rx"}, 2048}, {{ChangeKind::Rings, "tx"}, 4096}}; };
  for (const auto& s : {Sweep{[] { return twoNvmePairs(); }, nullptr, kNvmeIdentity, false},
                        Sweep{[] { return thunderboltNicWithModule(); }, nic, kNicEverything, false},
                        Sweep{[] { return twoNvmePairs(); }, nullptr, kNvmeIdentity, true},
                        Sweep{[] { return thunderboltNicWithModule(); }, nic, kNicEverything, true}}) {
    auto r = sweep(s, Fault::HostWrite);
    EXPECT_GE(r.points, 3);
    EXPECT_TRUE(r.lost.empty()) << r.lost.size() << " of " << r.points << " failed writes lost something:\n"
                                << joined(r.lost);
    std::printf("%s, EIO at each write: %d writes, %zu lost\n", s.killRevert ? "revert" : "apply", r.points,
                r.lost.size());
  }
}

// The same scenarios with each step on iommud's own files (the records, the transaction journal,
// modprobe.d: create, write, fsync, rename, unlink, the directory's fsync) failing in turn with a
// full disk or an I/O error, the process going on: a change whose record or journal could not be
// written is not made or is undone, and revert gives back the start.
void sweepOwnFiles(int error, bool lasting = false) {
  auto nic = [](FakeEthtool& e) { e.values = {{{ChangeKind::Rings, "rx"}, 2048}, {{ChangeKind::Rings, "tx"}, 4096}}; };
  for (const auto& s : {Sweep{[] { return twoNvmePairs(); }, nullptr, kNvmeIdentity, false},
                        Sweep{[] { return thunderboltNicWithModule(); }, nic, kNicEverything, false},
                        Sweep{[] { return twoNvmePairs(); }, nullptr, kNvmeIdentity, true},
                        Sweep{[] { return thunderboltNicWithModule(); }, nic, kNicEverything, true}}) {
    auto r = sweep(s, Fault::OwnFile, error, lasting);
    EXPECT_GE(r.points, 3);
    EXPECT_TRUE(r.lost.empty()) << r.lost.size() << " of " << r.points << " failed steps lost something:\n"
                                << joined(r.lost);
    std::printf("%s, %s %s own-file step%s: %d steps, %zu lost\n", s.killRevert ? "revert" : "apply",
                error == ENOSPC ? "ENOSPC" : "EIO", lasting ? "from each" : "at each", lasting ? " on" : "", r.points,
                r.lost.size());
  }
}

// A fault that lasts (a disk gone read-only or full: every own-file step from N on fails until the
// process ends), for every N: judged right after the process returns, before any restart, then as
// the others (sweepOwnFiles). A rollback binds even when it cannot journal the bind.
TEST(CrashSweep, ALastingENOSPCFromAnyStepOnLeavesNothingUnboundOrUnrecorded) {
  sweepOwnFiles(ENOSPC, true);
}

TEST(CrashSweep, ALastingEIOFromAnyStepOnLeavesNothingUnboundOrUnrecorded) {
  sweepOwnFiles(EIO, true);
}

TEST(CrashSweep, AStepOnItsOwnFilesThatFailsWithENOSPCLosesNothing) {
  sweepOwnFiles(ENOSPC);
}

TEST(CrashSweep, AStepOnItsOwnFilesThatFailsWithEIOLosesNothing) {
  sweepOwnFiles(EIO);
}

// Write-ahead: a change whose record cannot be saved first is not made.
TEST(Apply, AChangeWhoseRecordCannotBeSavedFirstIsNotMade) {
  Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
  fs::create_directories(b.root.hostPath("/run"));
  std::ofstream(b.root.hostPath(b.ctx.paths.runDir)) << "a file where the run directory should be\n";
  auto applied = b.apply(rules(kNvmeIdentity));
  EXPECT_EQ(count(applied, R::Done), 0) << describe(applied);
  EXPECT_NE(describe(applied).find("not made: its record could not be written first"), std::string::npos)
      << describe(applied);
  EXPECT_TRUE(b.kernel.log().empty()) << "nothing may be unbound or written";
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "DMA-FQ\n");
}

// A record a killed process left pending says so in status, and the next apply settles it from
// what the host shows: made (the type reads what it was writing) or not (it reads the value before).
TEST(Apply, ARecordLeftPendingIsShownAndSettledByTheNextApply) {
  for (const char* type : {"identity", "DMA-FQ"}) {
    SCOPED_TRACE(type);
    Bench b(twoNvmeOneGroup("6.12.48-1"), {6, 12, 30});
    app::ChangeRecord r;
    r.kind = ChangeKind::Domain;
    r.device = "0000:03:00.0";
    r.group = 20;
    r.object = "group 20";
    r.key = "type";
    r.original = "DMA-FQ";
    r.written = "identity";
    r.rule = "nvme-identity";
    r.pending = true;
    r.before = "DMA-FQ";
    ASSERT_TRUE(adapters::state::saveRecords(b.root, b.ctx.paths.runDir + "/changes.json", {r}).ok());
    b.host->write("/sys/kernel/iommu_groups/20/type", std::string(type) + "\n");
    auto st = b.status();
    st.changes = app::readRecords(b.root, b.ctx.paths);
    EXPECT_NE(app::statusText(st, false).find("identity (pending: the process making it stopped first"),
              std::string::npos)
        << app::statusText(st, false);

    b.apply(rules(""));
    auto records = app::readRecords(b.root, b.ctx.paths);
    if (std::string(type) == "identity") {
      ASSERT_EQ(records.size(), 1U);
      EXPECT_FALSE(records[0].pending);
      EXPECT_EQ(records[0].written, "identity");
    } else {
      EXPECT_TRUE(records.empty()) << "not made: no record";
    }
  }
}

}  // namespace apply_test
