#include "app/change/outcome_log.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "app/change/message_ids.hpp"

namespace outcome_log_test {

namespace app = iommud::app;
namespace core = iommud::core;
using Priority = iommud::adapters::systemd::Priority;
using R = app::Outcome::Result;

core::HostFacts nvmePair() {
  core::HostFacts h;
  for (const char* a : {"0000:02:00.0", "0000:03:00.0"}) {
    core::PciDevice d;
    d.address = a;
    d.vendorId = 0x144d;
    d.deviceId = 0xa808;
    d.group = 14;
    d.nvme.push_back(core::NvmeController{.name = a[6] == '2' ? "nvme0" : "nvme1", .serial = a});
    h.devices.push_back(d);
  }
  h.groups.push_back(core::Group{.id = 14, .devices = {"0000:02:00.0", "0000:03:00.0"}});
  return h;
}

app::Outcome identityDone() {
  app::Outcome o{
      R::Done, core::ChangeKind::Domain, "0000:02:00.0", "group 14", "type", "group 14 type DMA -> identity, done"};
  o.group = 14;
  o.members = {"0000:02:00.0", "0000:03:00.0"};
  o.rule = "nvme-pair";
  o.ruleWhere = "/etc/iommud/policies.d/50-nvme.toml:3:1";
  o.from = "DMA";
  o.to = "identity";
  o.risk = core::Risk::High;
  o.tradeOff = "these devices can DMA to all memory";
  return o;
}

std::string field(const iommud::adapters::systemd::Entry& e, const std::string& name) {
  auto it = std::find_if(e.fields.begin(), e.fields.end(), [&](const auto& f) { return f.name == name; });
  return it == e.fields.end() ? "<none>" : it->value;
}

TEST(OutcomeLog, AChangeThatWeakensIsolationIsAWarningNamingTheTradeOffTheDevicesAndTheRule) {
  auto e = app::journalEntry(identityDone(), nvmePair());
  EXPECT_EQ(e.priority, Priority::Warning);
  EXPECT_EQ(e.messageId, app::msgid::kWeakened);
  EXPECT_EQ(e.message,
            "group 14 (nvme0, nvme1) type DMA -> identity, done: these devices can DMA to all memory; exposure now: "
            "can reach all memory; accepted by rule nvme-pair in /etc/iommud/policies.d/50-nvme.toml:3:1");
  EXPECT_EQ(field(e, "IOMMUD_EXPOSURE"), "all-memory");
  EXPECT_EQ(field(e, "IOMMUD_DEVICE"), "0000:02:00.0");
  EXPECT_EQ(field(e, "IOMMUD_NAME"), "nvme0");
  EXPECT_EQ(field(e, "IOMMUD_GROUP"), "14");
  EXPECT_EQ(field(e, "IOMMUD_RULE"), "nvme-pair");
  EXPECT_EQ(field(e, "IOMMUD_POLICY"), "/etc/iommud/policies.d/50-nvme.toml:3:1");
  EXPECT_EQ(field(e, "IOMMUD_FROM"), "DMA");
  EXPECT_EQ(field(e, "IOMMUD_TO"), "identity");
  EXPECT_EQ(field(e, "IOMMUD_RISK"), "high");
  EXPECT_EQ(field(e, "IOMMUD_IDENTITY"), "144d:a808/0000:0000 serial 0000:02:00.0");
}

TEST(OutcomeLog, ALiveChangeToLazyNamesTheWindowAndANarrowingOneNoNewExposure) {
  auto lazy = identityDone();
  lazy.to = "DMA-FQ";
  lazy.message = "group 14 type DMA -> DMA-FQ, done";
  lazy.tradeOff.clear();
  auto e = app::journalEntry(lazy, nvmePair());
  EXPECT_NE(e.message.find("; exposure now: mapped buffers, with a window after unmap;"), std::string::npos)
      << e.message;
  EXPECT_EQ(field(e, "IOMMUD_EXPOSURE"), "mapped-window");
  auto strict = identityDone();
  strict.from = "identity";
  strict.to = "DMA";
  strict.message = "group 14 type identity -> DMA, done";
  strict.tradeOff.clear();
  auto n = app::journalEntry(strict, nvmePair());
  EXPECT_EQ(n.message.find("exposure now"), std::string::npos) << n.message;
  EXPECT_EQ(field(n, "IOMMUD_EXPOSURE"), "mapped");
}

TEST(OutcomeLog, EachKindOfEventHasItsOwnMessageIdAndPriority) {
  auto host = nvmePair();
  auto o = identityDone();
  o.risk = core::Risk::None;
  EXPECT_EQ(app::journalEntry(o, host).messageId, app::msgid::kChanged);
  EXPECT_EQ(app::journalEntry(o, host).priority, Priority::Notice);
  o.result = R::Advised;
  EXPECT_EQ(app::journalEntry(o, host).messageId, app::msgid::kAdvised);
  o.result = R::Failed;
  EXPECT_EQ(app::journalEntry(o, host).messageId, app::msgid::kFailed);
  EXPECT_EQ(app::journalEntry(o, host).priority, Priority::Err);
  EXPECT_EQ(app::journalEntry(o, host).message.rfind("failed: ", 0), 0U);
  o.result = R::Skipped;
  o.skip = core::SkipReason::InUse;
  EXPECT_EQ(app::journalEntry(o, host).messageId, app::msgid::kRefused);
  EXPECT_EQ(field(app::journalEntry(o, host), "IOMMUD_SKIP"), "in-use");
  // Waiting for a hotplug is no refusal: only a debug line.
  o.skip = core::SkipReason::HotplugOnly;
  EXPECT_EQ(app::journalEntry(o, host).messageId, "");
  EXPECT_EQ(app::journalEntry(o, host).priority, Priority::Debug);
}

TEST(OutcomeLog, ARevertSaysItRevertedAndNamesTheRuleThatHadMadeTheChange) {
  auto o = identityDone();
  o.from = "identity";
  o.to = "DMA";
  o.message = "group 14 type identity -> DMA, done";
  auto e = app::journalEntry(o, nvmePair(), app::OutcomeOf::Revert);
  EXPECT_EQ(e.messageId, app::msgid::kReverted);
  EXPECT_EQ(e.priority, Priority::Notice);
  EXPECT_EQ(e.message.rfind("reverted: group 14 (nvme0, nvme1) type identity -> DMA, done", 0), 0U) << e.message;
  EXPECT_NE(e.message.find("; the change was made by rule nvme-pair in"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find("accepted"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find("can DMA to all memory"), std::string::npos) << "a revert gives up nothing";
}

}  // namespace outcome_log_test
