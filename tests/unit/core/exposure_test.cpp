#include "core/exposure.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace exposure_test {

using namespace iommud;
using namespace iommud::core;
using namespace iommud::testing;

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
  // Bridges are not counted, and the host bridge masters no DMA: only the two drives.
  EXPECT_EQ(reachAllMemory(s.host, all), (std::vector<std::string>{"0000:03:00.0", "0000:04:00.0"}));
  EXPECT_EQ(app::exposureSummary(s.host, all).substr(0, 33), "2 devices can reach all memory: n");
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

TEST(Exposure, AHostBridgeMastersNoDmaWhateverItsGroupOrTheIommu) {
  auto pt = twoNvmeOneGroup();
  pt->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro iommu=pt");
  pt->write("/sys/kernel/iommu_groups/0/type", "identity\n");
  auto inIdentity = of(app::exposuresOf(statusOf(*pt)), "0000:00:00.0");
  EXPECT_EQ(inIdentity.level, Exposure::None);
  EXPECT_TRUE(says(inIdentity, Reason::Source::Device, "a host bridge (class 0x0600)"));
  EXPECT_EQ(of(app::exposuresOf(statusOf(*noIommu())), "0000:00:00.0").level, Exposure::None);
  // Other classes are not guessed: an ISA bridge (0x0601) can master DMA through its 8237.
  auto h = noIommu();
  h->pci({.address = "0000:00:1f.0", .device = 0x7a06, .classCode = 0x060100});
  EXPECT_EQ(of(app::exposuresOf(statusOf(*h)), "0000:00:1f.0").level, Exposure::AllMemory);
}

// armSmmuV3 with an NVMe whose driver is not loaded: on arm64 it gets no group until one binds.
std::unique_ptr<FakeHost> armWithUnboundNvme() {
  auto h = armSmmuV3();
  h->pci({.address = "0000:00:02.0", .vendor = 0x1b36, .device = 0x0010, .classCode = 0x010802});
  return h;
}

TEST(Exposure, TheSmmuV3AbortsTheDmaOfADeviceInNoGroup) {
  auto s = statusOf(*armWithUnboundNvme());
  auto nvme = of(app::exposuresOf(s), "0000:00:02.0");
  EXPECT_EQ(nvme.level, Exposure::None);
  EXPECT_TRUE(says(nvme, Reason::Source::Device, "the SMMUv3 aborts the DMA of a stream with no domain"));
  EXPECT_TRUE(reachAllMemory(s.host, app::exposuresOf(s)).empty());
}

TEST(Exposure, DisableBypassOffLetsAStreamInNoGroupBypassTheSmmuV3) {
  auto h = armWithUnboundNvme();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro arm-smmu-v3.disable_bypass=0");
  auto nvme = of(app::exposuresOf(statusOf(*h)), "0000:00:02.0");
  EXPECT_EQ(nvme.level, Exposure::AllMemory);
  EXPECT_TRUE(says(nvme, Reason::Source::Cmdline, "arm-smmu-v3.disable_bypass=0"));
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro arm_smmu_v3.disable_bypass=y");
  EXPECT_EQ(of(app::exposuresOf(statusOf(*h)), "0000:00:02.0").level, Exposure::None);
}

TEST(Exposure, AnSmmuV2FaultsUnmatchedStreamsOnlyWhenItsConfigSaysSo) {
  auto h = std::make_unique<FakeHost>("6.1.0-56-arm64");
  h->machine("aarch64");
  h->config({"CONFIG_ARM_SMMU=y", "CONFIG_ARM_SMMU_DISABLE_BYPASS_BY_DEFAULT=y", "CONFIG_IOMMU_DEFAULT_DMA_STRICT=y"});
  h->otherUnit("smmu.0x0000000009050000");
  h->pci({.address = "0000:00:01.0", .device = 0x10fb, .classCode = 0x020000, .driver = "ixgbe"});
  h->pci({.address = "0000:00:02.0", .device = 0x10fb, .classCode = 0x020000});
  h->group(0, "DMA\n", {"0000:00:01.0"});
  auto nic = of(app::exposuresOf(statusOf(*h)), "0000:00:02.0");
  EXPECT_EQ(nic.level, Exposure::None);
  EXPECT_TRUE(says(nic, Reason::Source::Device, "faults the DMA of an unmatched stream"));
  h->config({"CONFIG_ARM_SMMU=y", "# CONFIG_ARM_SMMU_DISABLE_BYPASS_BY_DEFAULT is not set"});
  EXPECT_EQ(of(app::exposuresOf(statusOf(*h)), "0000:00:02.0").level, Exposure::AllMemory);
}

TEST(Exposure, VfioDevicesAreMappedWhateverTheDefaultDomainSays) {
  auto s = statusOf(*vfioGroup());
  auto all = app::exposuresOf(s);
  EXPECT_EQ(of(all, "0000:01:00.0").level, Exposure::Mapped);
  EXPECT_EQ(of(all, "0000:00:00.0").level, Exposure::None);  // a host bridge, in identity from iommu=pt
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

TEST(Exposure, AVirtioDeviceWithoutAccessPlatformReachesAllMemoryWhateverItsGroup) {
  auto s = statusOf(*virtioGuest());
  auto all = app::exposuresOf(s);
  EXPECT_EQ(of(all, "0000:00:04.0").level, Exposure::Mapped);
  auto bypass = of(all, "0000:00:05.0");
  EXPECT_EQ(bypass.level, Exposure::AllMemory);
  // The chain keeps what the group says and ends with why it does not count.
  EXPECT_TRUE(says(bypass, Reason::Source::Group, "group 5 reads DMA"));
  EXPECT_FALSE(says(bypass, Reason::Source::Device, "strict invalidation"));  // its group would have meant it
  EXPECT_EQ(bypass.reasons.back().source, Reason::Source::Device);
  EXPECT_NE(bypass.reasons.back().text.find("virtio1 did not negotiate VIRTIO_F_ACCESS_PLATFORM"), std::string::npos);
  EXPECT_EQ(reachAllMemory(s.host, all), (std::vector<std::string>{"0000:00:05.0"}));
}

TEST(Exposure, AVirtioDeviceWithNoDriverNegotiatedNothingAndKeepsItsGroupsExposure) {
  auto h = virtioGuest();
  std::filesystem::remove(h->root() / "sys/devices/pci0000:00/0000:00:05.0/virtio1/driver");
  h->write("/sys/devices/pci0000:00/0000:00:05.0/virtio1/features", std::string(64, '0') + "\n");
  auto s = statusOf(*h);
  ASSERT_TRUE(s.host.device("0000:00:05.0")->virtio);
  EXPECT_FALSE(s.host.device("0000:00:05.0")->virtio->accessPlatform);
  EXPECT_EQ(of(app::exposuresOf(s), "0000:00:05.0").level, Exposure::Mapped);
  EXPECT_FALSE(hasFinding(s, "virtio-bypasses-iommu"));
}

TEST(Exposure, AVirtioDeviceWithoutAccessPlatformOnAHostWithoutIommuSaysBoth) {
  auto h = noIommu();
  h->virtio("0000:00:05.0", "virtio1", false);
  auto s = statusOf(*h);
  auto bypass = of(app::exposuresOf(s), "0000:00:05.0");
  EXPECT_EQ(bypass.level, Exposure::AllMemory);
  EXPECT_TRUE(says(bypass, Reason::Source::Device, "no IOMMU translates DMA on this host"));
  EXPECT_TRUE(says(bypass, Reason::Source::Device, "VIRTIO_F_ACCESS_PLATFORM"));
}
}  // namespace exposure_test
