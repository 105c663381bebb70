#include "app/measure/effect_watch.hpp"

#include <gtest/gtest.h>

#include "app/change/message_ids.hpp"

namespace effect_watch_test {

namespace app = iommud::app;
namespace core = iommud::core;

// Two NVMe drives in group 14 (DMA-FQ), a NIC alone in group 15 (DMA).
core::HostFacts host() {
  core::HostFacts h;
  h.groups = {{14, core::DomainType::DmaFq, "DMA-FQ", {"0000:01:00.0", "0000:02:00.0"}},
              {15, core::DomainType::Dma, "DMA", {"0000:03:00.0"}}};
  core::PciDevice a;
  a.address = "0000:01:00.0";
  a.group = 14;
  a.nvme = {{"nvme0"}};
  core::PciDevice b = a;
  b.address = "0000:02:00.0";
  b.nvme = {{"nvme1"}};
  core::PciDevice nic;
  nic.address = "0000:03:00.0";
  nic.group = 15;
  h.devices = {a, b, nic};
  return h;
}

app::Outcome outcome(app::Outcome::Result result, core::ChangeKind kind, const std::string& device,
                     const std::string& to = "") {
  app::Outcome o;
  o.result = result;
  o.kind = kind;
  o.device = device;
  o.to = to;
  return o;
}

// A reading of the counters: nvme0's maps, the host's IOMMU page maps.
core::DmaReading reading(uint64_t nvme0Maps, uint64_t hostMaps) {
  core::DmaReading r;
  r.armed = {core::DmaEvent::MapPage, core::DmaEvent::UnmapPage, core::DmaEvent::IommuMap};
  r.devices["0000:01:00.0"].maps = nvme0Maps;
  r.devices["0000:01:00.0"].mappedBytes = nvme0Maps * 4096;
  r.host.maps = hostMaps;
  return r;
}

TEST(EffectSubjects, ADomainChangeConcernsTheWholeGroupAndTakesItOutOfTranslation) {
  auto subjects = app::effectSubjects(
      {outcome(app::Outcome::Result::Done, core::ChangeKind::Domain, "0000:01:00.0", "identity")}, host());
  ASSERT_EQ(subjects.size(), 2U);
  EXPECT_EQ(subjects[0], (core::EffectSubject{"0000:01:00.0", "nvme0", true, false}));
  EXPECT_EQ(subjects[1], (core::EffectSubject{"0000:02:00.0", "nvme1", true, false}));
}

TEST(EffectSubjects, OtherChangesLeaveTranslationAsItWasAndOnlyDoneChangesCount) {
  auto subjects =
      app::effectSubjects({outcome(app::Outcome::Result::Done, core::ChangeKind::Rings, "0000:03:00.0"),
                           outcome(app::Outcome::Result::Failed, core::ChangeKind::Domain, "0000:01:00.0", "identity"),
                           outcome(app::Outcome::Result::Advised, core::ChangeKind::Domain, "0000:01:00.0", "identity"),
                           outcome(app::Outcome::Result::Done, core::ChangeKind::Rings, "")},
                          host());
  ASSERT_EQ(subjects.size(), 1U);
  EXPECT_EQ(subjects[0], (core::EffectSubject{"0000:03:00.0", "0000:03:00.0", true, true}));
}

TEST(EffectWatch, MeasuresAWindowBeforeTheWorkAndOneAfterIt) {
  app::EffectWatch watch(5);
  // 1000 maps/s through translation for 10 s, sampled every second.
  for (int t = 0; t <= 10; ++t) watch.sample(t, reading(1000U * t, 1000U * t));
  watch.workStarting(10.5, reading(10500, 10500));
  EXPECT_FALSE(watch.due());
  // The change: identity. nvme0 keeps mapping (1200/s) but the IOMMU maps nothing more.
  watch.workEnded(11, reading(11000, 11000), {{"0000:01:00.0", "nvme0", true, false}}, "2026-11-25T18:00:00Z");
  ASSERT_TRUE(watch.due());
  EXPECT_DOUBLE_EQ(*watch.due(), 16);
  EXPECT_TRUE(watch.finish(15.9, reading(17000, 11000), 4096).empty());
  auto done = watch.finish(16, reading(17000, 11000), 4096);
  EXPECT_FALSE(watch.due());
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(done[0].changedAt, "2026-11-25T18:00:00Z");
  EXPECT_DOUBLE_EQ(done[0].hostMapsBefore, 1000);  // 5500 maps in 5.5 s (from the reading at t=5)
  EXPECT_DOUBLE_EQ(done[0].hostMapsAfter, 0);
  ASSERT_EQ(done[0].effects.size(), 1U);
  const auto& e = done[0].effects[0];
  EXPECT_DOUBLE_EQ(e.beforeSeconds, 5.5);
  EXPECT_DOUBLE_EQ(e.afterSeconds, 5);
  ASSERT_TRUE(e.before && e.after);
  EXPECT_DOUBLE_EQ(e.before->mapsPerSecond, 1000);
  EXPECT_DOUBLE_EQ(e.after->mapsPerSecond, 1200);
  EXPECT_EQ(e.before->translated, true);
  EXPECT_EQ(e.after->translated, false);
}

TEST(EffectWatch, WithoutAWindowBeforeTheChangeThereIsNothingToMeasure) {
  app::EffectWatch watch(5);
  watch.workStarting(0, reading(0, 0));  // the daemon has just started counting
  watch.workEnded(1, reading(10, 10), {{"0000:01:00.0", "nvme0", true, false}}, "t");
  EXPECT_FALSE(watch.due());
  for (int t = 2; t <= 3; ++t) watch.sample(t, reading(10, 10));
  watch.workStarting(3.4, reading(10, 10));  // 3.4 s of counting: more than half a window will do
  watch.workEnded(4, reading(10, 10), {{"0000:01:00.0", "nvme0", true, false}}, "t");
  EXPECT_TRUE(watch.due());
  watch.workStarting(10, reading(10, 10));
  watch.workEnded(10.1, reading(10, 10), {}, "t");  // the work changed nothing
  EXPECT_DOUBLE_EQ(*watch.due(), 9);                // only the earlier change waits
}

TEST(EffectWatch, TheJournalEntryAndTheSignalCarryTheNumbers) {
  app::EffectWatch watch(2);
  for (int t = 0; t <= 4; ++t) watch.sample(t, reading(1000U * t, 1000U * t));
  watch.workStarting(4, reading(4000, 4000));
  watch.workEnded(4, reading(4000, 4000), {{"0000:01:00.0", "nvme0", true, false}}, "2026-11-25T18:00:00Z");
  auto done = watch.finish(6, reading(6000, 4000), 4096);
  ASSERT_EQ(done.size(), 1U);
  ASSERT_EQ(done[0].effects.size(), 1U);
  auto entry = app::journalEntry(done[0].effects[0], done[0]);
  EXPECT_EQ(entry.messageId, iommud::app::msgid::kMeasured);
  std::map<std::string, std::string> fields;
  for (const auto& f : entry.fields) fields[f.name] = f.value;
  EXPECT_EQ(fields["IOMMUD_DEVICE"], "0000:01:00.0");
  EXPECT_EQ(fields["IOMMUD_NAME"], "nvme0");
  EXPECT_EQ(fields["IOMMUD_TRANSLATED_BEFORE"], "yes");
  EXPECT_EQ(fields["IOMMUD_TRANSLATED_AFTER"], "no");
  EXPECT_EQ(fields["IOMMUD_MAPS_PER_S_BEFORE"], "1000");
  EXPECT_EQ(fields["IOMMUD_MAPS_PER_S_AFTER"], "1000");
  EXPECT_EQ(fields["IOMMUD_MEAN_MAP_BYTES_AFTER"], "4096");
  EXPECT_EQ(fields["IOMMUD_HOST_IOMMU_MAPS_PER_S_BEFORE"], "1000");
  EXPECT_EQ(fields["IOMMUD_HOST_IOMMU_MAPS_PER_S_AFTER"], "0");
  EXPECT_EQ(fields["IOMMUD_CHANGED_AT"], "2026-11-25T18:00:00Z");
  EXPECT_NE(entry.message.find("translated -> not translated"), std::string::npos) << entry.message;
  EXPECT_NE(entry.message.find("host: 1000 -> 0 IOMMU page maps/s"), std::string::npos) << entry.message;

  auto views = app::effectViews(done[0]);
  ASSERT_EQ(views.size(), 1U);
  EXPECT_EQ(views[0].translatedBefore, "yes");
  EXPECT_EQ(views[0].translatedAfter, "no");
  EXPECT_DOUBLE_EQ(views[0].mapsAfter, 1000);
  EXPECT_TRUE(views[0].mapsAttributed);
}

}  // namespace effect_watch_test
