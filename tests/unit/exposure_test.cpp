#include "core/exposure.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

using namespace iommud;
using namespace iommud::core;
using namespace iommud::testing;

namespace {

DeviceExposure of(const std::vector<DeviceExposure>& all, const std::string& address) {
  for (const auto& e : all) {
    if (e.address == address) return e;
  }
  throw std::runtime_error("no exposure for " + address);
}

bool says(const DeviceExposure& e, Reason::Source source, const std::string& text) {
  return std::any_of(e.reasons.begin(), e.reasons.end(),
                     [&](const Reason& r) { return r.source == source && r.text.find(text) != std::string::npos; });
}

}  // namespace

TEST(Exposure, LazyTranslationLeavesAWindowAfterUnmap) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto all = app::exposuresOf(s);
  auto nvme = of(all, "0000:03:00.0");
  EXPECT_EQ(nvme.level, Exposure::MappedWindow);
  EXPECT_TRUE(says(nvme, Reason::Source::Config, "CONFIG_IOMMU_DEFAULT_DMA_LAZY"));
  EXPECT_TRUE(says(nvme, Reason::Source::Group, "group 20 reads DMA-FQ (the boot default), shared by 6 devices"));
  EXPECT_TRUE(reachAllMemory(s.host, all).empty());
  EXPECT_EQ(app::exposureSummary(s.host, all), "no device can reach all memory");
}

TEST(Exposure, AnUntrustedDeviceInStrictDmaIsIsolatedBelowAPage) {
  auto s = statusOf(*thunderboltNic());
  auto all = app::exposuresOf(s);
  auto nic = of(all, "0000:05:00.0");
  EXPECT_EQ(nic.level, Exposure::MappedSubPage);
  EXPECT_TRUE(says(nic, Reason::Source::Device, "bounced through swiotlb"));
  EXPECT_EQ(of(all, "0000:00:0d.2").level, Exposure::MappedWindow);  // the NHI is trusted
}

TEST(Exposure, PassthroughOnTheCommandLineReachesAllMemoryAndSaysWhy) {
  auto h = twoNvmeOneGroup();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro iommu=pt");
  h->write("/sys/kernel/iommu_groups/0/type", "identity\n");
  h->write("/sys/kernel/iommu_groups/20/type", "identity\n");
  auto s = statusOf(*h);
  auto all = app::exposuresOf(s);
  auto nvme = of(all, "0000:04:00.0");
  EXPECT_EQ(nvme.level, Exposure::AllMemory);
  EXPECT_TRUE(says(nvme, Reason::Source::Cmdline, "iommu=pt"));
  EXPECT_TRUE(says(nvme, Reason::Source::Device, "all memory"));
  // Bridges are not counted: only the two drives and the host bridge.
  EXPECT_EQ(reachAllMemory(s.host, all), (std::vector<std::string>{"0000:00:00.0", "0000:03:00.0", "0000:04:00.0"}));
  EXPECT_EQ(app::exposureSummary(s.host, all).substr(0, 33), "3 devices can reach all memory: 0");
}

TEST(Exposure, WithoutAnIommuEveryDeviceReachesAllMemory) {
  auto s = statusOf(*noIommu());
  auto all = app::exposuresOf(s);
  auto nic = of(all, "0000:00:1f.6");
  EXPECT_EQ(nic.level, Exposure::AllMemory);
  EXPECT_TRUE(says(nic, Reason::Source::Device, "no IOMMU translates DMA"));
  EXPECT_TRUE(says(nic, Reason::Source::Config, "CONFIG_INTEL_IOMMU_DEFAULT_ON"));
}

TEST(Exposure, AmdHatDisIsNamedAsTheReasonNothingIsTranslated) {
  auto h = noIommu();
  std::string ivrs = std::string("IVRS") + std::string("\x58\x00\x00\x00\x02\x00", 6) + "AMD   AmdTable" +
                     std::string(12, '\0') + std::string("\x41\x30\x20\x00", 4) + std::string(8, '\0');
  std::string ivhd(40, '\0');
  ivhd[0] = 0x40;
  ivhd[2] = 40;
  ivhd[20] = 0x01;  // HATDis
  h->firmwareTable("IVRS", ivrs + ivhd);
  auto nic = of(app::exposuresOf(statusOf(*h)), "0000:00:1f.6");
  EXPECT_EQ(nic.level, Exposure::AllMemory);
  EXPECT_TRUE(says(nic, Reason::Source::Firmware, "IVRS sets HATDis"));
}

TEST(Exposure, ADeviceOutsideEveryGroupReachesAllMemoryOnAnIommuHost) {
  auto h = twoNvmeOneGroup();
  h->pci({.address = "0000:00:1f.6", .device = 0x15bc, .classCode = 0x020000, .driver = "e1000e"});
  auto s = statusOf(*h);
  auto nic = of(app::exposuresOf(s), "0000:00:1f.6");
  EXPECT_EQ(nic.level, Exposure::AllMemory);
  EXPECT_TRUE(says(nic, Reason::Source::Device, "in no IOMMU group"));
}

TEST(Exposure, VfioDevicesAreMappedWhateverTheDefaultDomainSays) {
  auto s = statusOf(*vfioGroup());
  auto all = app::exposuresOf(s);
  EXPECT_EQ(of(all, "0000:01:00.0").level, Exposure::Mapped);
  EXPECT_EQ(of(all, "0000:00:00.0").level, Exposure::AllMemory);  // identity, from iommu=pt
}

TEST(Exposure, NamesTheRuleOfAChangeIommudMade) {
  auto h = twoNvmeOneGroup();
  h->write("/sys/kernel/iommu_groups/20/type", "identity\n");
  auto s = statusOf(*h);
  s.changes.push_back({.kind = ChangeKind::Domain,
                       .device = "0000:03:00.0",
                       .group = 20,
                       .object = "group 20",
                       .key = "type",
                       .original = "DMA-FQ",
                       .written = "identity",
                       .rule = "nvme-pair",
                       .ruleWhere = "/etc/iommud/policies.d/50-nvme.toml:3:1"});
  auto nvme = of(app::exposuresOf(s), "0000:03:00.0");
  EXPECT_EQ(nvme.level, Exposure::AllMemory);
  EXPECT_TRUE(
      says(nvme, Reason::Source::Iommud,
           "iommud set group 20 from DMA-FQ to identity by rule nvme-pair (/etc/iommud/policies.d/50-nvme.toml:3:1)"));
  // A record of another value (the group was changed back since) is not the reason.
  s.changes.back().written = "DMA";
  EXPECT_FALSE(says(of(app::exposuresOf(s), "0000:03:00.0"), Reason::Source::Iommud, "iommud set"));
}

TEST(Exposure, StrictTranslationMapsBuffersOnly) {
  auto h = twoNvmeOneGroup();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro iommu.strict=1");
  h->write("/sys/kernel/iommu_groups/20/type", "DMA\n");
  h->write("/sys/kernel/iommu_groups/0/type", "DMA\n");
  auto s = statusOf(*h);
  auto nvme = of(app::exposuresOf(s), "0000:03:00.0");
  EXPECT_EQ(nvme.level, Exposure::Mapped);
  EXPECT_TRUE(says(nvme, Reason::Source::Cmdline, "iommu.strict"));
}

TEST(Exposure, NamesEachLevel) {
  EXPECT_EQ(toString(Exposure::AllMemory), "all-memory");
  EXPECT_EQ(toString(Exposure::MappedWindow), "mapped-window");
  EXPECT_EQ(toString(Exposure::MappedSubPage), "mapped-subpage");
  EXPECT_EQ(describe(Exposure::AllMemory), "can reach all memory");
}
