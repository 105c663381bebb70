#include "core/findings.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace findings_test {

using namespace iommud;
using namespace iommud::core;
using namespace iommud::testing;
using Ids = std::vector<std::string>;

TEST(Findings, TwoNvmeInOneGroupOnAnAffectedKernel) {
  auto s = statusOf(*twoNvmeOneGroup("6.12.30-1"));
  const auto* f = findingById(s, "vtd-iotlb-sync-map");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::Warning);
  EXPECT_EQ(f->groups, (std::vector<int>{20}));
  EXPECT_EQ(f->devices, (std::vector<std::string>{"0000:03:00.0", "0000:04:00.0"}));
  EXPECT_NE(f->summary.find("Kernel 6.12.30"), std::string::npos);
  EXPECT_NE(f->summary.find("under an older version number"), std::string::npos);
  ASSERT_EQ(f->remedies.size(), 3U);
  EXPECT_NE(f->remedies[1].securityCost.find("all of physical memory"), std::string::npos);
}

TEST(Findings, NoIotlbSyncMapFindingOnFixedOrOlderKernels) {
  for (const char* v : {"6.12.43-1", "6.1.140-1", "6.17.1-1", "6.16.2-1", "6.15.11-1"}) {
    EXPECT_FALSE(hasFinding(statusOf(*twoNvmeOneGroup(v)), "vtd-iotlb-sync-map")) << v;
  }
  for (const char* v : {"6.10.0-1", "6.14.11-1", "6.15.10-1", "6.16.1-1"}) {
    EXPECT_TRUE(hasFinding(statusOf(*twoNvmeOneGroup(v)), "vtd-iotlb-sync-map")) << v;
  }
}

TEST(Findings, NoIotlbSyncMapFindingWhenTheFlushIsReallyNeededOrTheGroupIsIdentity) {
  auto cm = twoNvmeOneGroup();
  cm->intelUnit("dmar0", kQemuCap, kQemuEcap);
  EXPECT_FALSE(hasFinding(statusOf(*cm), "vtd-iotlb-sync-map"));
  auto id = twoNvmeOneGroup();
  id->write("/sys/kernel/iommu_groups/20/type", "identity\n");
  EXPECT_FALSE(hasFinding(statusOf(*id), "vtd-iotlb-sync-map"));
}

TEST(Findings, NoIotlbSyncMapFindingOnAChipsetOfTheRwbfQuirkList) {
  // An Intel Mobile 4 Series host bridge: the kernel flushes the write buffer although RWBF is 0.
  auto quirk = twoNvmeOneGroup();
  quirk->pci({.address = "0000:00:00.0", .device = 0x2a40, .classCode = 0x060000});
  EXPECT_FALSE(hasFinding(statusOf(*quirk), "vtd-iotlb-sync-map"));
  auto other = twoNvmeOneGroup();
  other->pci({.address = "0000:00:00.0", .device = 0x2a41, .classCode = 0x060000});
  EXPECT_TRUE(hasFinding(statusOf(*other), "vtd-iotlb-sync-map"));
}

TEST(Findings, ThunderboltNicBouncesAndNamesTheCostOfIommuOff) {
  auto s = statusOf(*thunderboltNic());
  EXPECT_EQ(findingIds(s), (Ids{"default-on", "untrusted-bounce"}));
  const auto* f = findingById(s, "untrusted-bounce");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->devices, (std::vector<std::string>{"0000:05:00.0"}));
  EXPECT_EQ(f->groups, (std::vector<int>{17}));
  EXPECT_NE(f->summary.find("refuses identity"), std::string::npos);
  EXPECT_NE(f->remedies.back().securityCost.find("malicious Thunderbolt/USB4 device"), std::string::npos);
}

TEST(Findings, UntrustedBounceWarnsWhenSwiotlbIsInactive) {
  auto h = thunderboltNic();
  h->cmdline("swiotlb=noforce");
  auto s = statusOf(*h);
  const auto* f = findingById(s, "untrusted-bounce");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->summary.find("swiotlb is inactive"), std::string::npos);
  // A finding of its own, an error: the device's small mappings fail.
  const auto* none = findingById(s, "untrusted-no-bounce-buffers");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->severity, Severity::Error);
  EXPECT_EQ(none->devices, (std::vector<std::string>{"0000:05:00.0"}));
  EXPECT_NE(none->summary.find("swiotlb=noforce turned the pool off"), std::string::npos) << none->summary;
  ASSERT_EQ(none->remedies.size(), 1U);
  EXPECT_EQ(none->remedies[0].action, "Remove swiotlb=noforce from the kernel command line");
}

TEST(Findings, UntrustedNicBehindAnExternalFacingPortWithoutASwiotlbPool) {
  // The tests/vm untrusted guest: the kernel said "DMA bounce buffers are inactive" for this NIC.
  auto s = statusOf(*externalPortGuest());
  EXPECT_EQ(findingIds(s), (Ids{"default-on", "untrusted-bounce", "untrusted-no-bounce-buffers"}));
  const auto* none = findingById(s, "untrusted-no-bounce-buffers");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->devices, (std::vector<std::string>{"0000:06:00.0"}));  // not the bridges above it
  EXPECT_NE(none->remedies[0].action.find("iommu=soft"), std::string::npos);
  const auto* f = findingById(s, "untrusted-bounce");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->devices, (std::vector<std::string>{"0000:06:00.0"}));
  EXPECT_EQ(f->groups, (std::vector<int>{12}));
  EXPECT_NE(f->summary.find("external-facing port"), std::string::npos);
  EXPECT_NE(f->summary.find("swiotlb is inactive"), std::string::npos);
}

TEST(Findings, CachingModeInAGuest) {
  auto s = statusOf(*intelGuestCachingMode());
  EXPECT_EQ(findingIds(s), (Ids{"caching-mode"}));  // intel_iommu=on: translation was asked for
  EXPECT_EQ(findingById(s, "caching-mode")->groups, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Findings, DefaultOnWhenTranslationComesFromTheConfig) {
  auto s = statusOf(*intelBareMetal());
  EXPECT_EQ(findingIds(s), (Ids{"default-on"}));
  EXPECT_NE(findingById(s, "default-on")->summary.find("CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y turned VT-d on"),
            std::string::npos);
  auto h = intelBareMetal();
  h->cmdline("intel_iommu=on");
  EXPECT_FALSE(hasFinding(statusOf(*h), "default-on"));
}

// The passthrough remedy names a parameter this architecture's kernel reads: iommu=pt is x86's
// alone (arch/x86/kernel/pci-dma.c); an arm64 kernel ignores it and reads iommu.passthrough=1.
TEST(Findings, DefaultOnNamesThePassthroughParameterOfTheArchitecture) {
  auto remedyNames = [](const Finding* f) {
    std::vector<std::string> names;
    for (const auto& r : f->remedies) names.push_back(r.action);
    return names;
  };
  auto arm = statusOf(*armSmmuV3());
  ASSERT_TRUE(hasFinding(arm, "default-on"));
  auto armNames = remedyNames(findingById(arm, "default-on"));
  EXPECT_NE(std::find(armNames.begin(), armNames.end(), "iommu.passthrough=1 on the command line"), armNames.end());
  for (const auto& n : armNames) EXPECT_EQ(n.find("iommu=pt"), std::string::npos) << n;
  auto x86 = statusOf(*intelBareMetal());
  auto x86Names = remedyNames(findingById(x86, "default-on"));
  EXPECT_NE(std::find(x86Names.begin(), x86Names.end(), "iommu=pt on the command line"), x86Names.end());
}

TEST(Findings, SmmuStrict) {
  auto s = statusOf(*armSmmuV3());
  const auto* f = findingById(s, "smmu-strict");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->groups, (std::vector<int>{0, 1}));
}

TEST(Findings, VfioGroupsStayTranslatedEvenUnderPassthrough) {
  auto s = statusOf(*vfioGroup());
  const auto* f = findingById(s, "vfio-translated");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->groups, (std::vector<int>{2}));
  EXPECT_EQ(f->devices, (std::vector<std::string>{"0000:01:00.0", "0000:01:00.1"}));
  EXPECT_NE(f->summary.find("even under passthrough"), std::string::npos);
}

bool remedyContains(const Finding& f, std::string_view text) {
  return std::any_of(f.remedies.begin(), f.remedies.end(),
                     [&](const Remedy& r) { return r.action.find(text) != std::string::npos; });
}

TEST(Findings, WithoutAnIommuEveryDeviceReachesAllMemoryAndTheWayBackIsNamed) {
  // The firmware has a DMAR table; the kernel's config leaves VT-d off.
  auto h = noIommu();
  auto s = statusOf(*h);
  ASSERT_EQ(findingIds(s), Ids{"iommu-off"});
  const auto& f = s.findings.front();
  EXPECT_EQ(f.severity, Severity::Warning);
  EXPECT_EQ(f.devices.size(), s.host.devices.size());
  EXPECT_NE(f.summary.find("this kernel leaves VT-d off by default"), std::string::npos);
  EXPECT_NE(f.summary.find("can read and write all of physical memory"), std::string::npos);
  EXPECT_TRUE(remedyContains(f, "intel_iommu=on on the kernel command line"));
  for (const auto& r : f.remedies) EXPECT_NE(r.securityCost.find("translation costs work"), std::string::npos);

  // No table at all: the firmware setup, or a virtual IOMMU for a VM.
  auto bare = std::make_unique<FakeHost>("6.1.0-56-amd64");
  bare->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro quiet");
  bare->pci({.address = "0000:00:1f.6", .device = 0x15bc, .classCode = 0x020000, .driver = "e1000e"});
  auto none = statusOf(*bare);
  const auto* g = findingById(none, "iommu-off");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->summary.find("The firmware describes no IOMMU"), std::string::npos);
  EXPECT_TRUE(remedyContains(*g, "Turn the IOMMU on in the firmware setup (Intel: VT-d; AMD: IOMMU or AMD-Vi)"));
  EXPECT_TRUE(remedyContains(*g, "virtual IOMMU"));
}

TEST(Findings, AnIommuTurnedOffOnTheCommandLineNamesTheParameterToRemove) {
  auto h = noIommu();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro quiet intel_iommu=off");
  auto s = statusOf(*h);
  ASSERT_FALSE(s.mode.present);
  const auto* f = findingById(s, "iommu-off");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->summary.find("The kernel command line turns it off (intel_iommu=off)"), std::string::npos);
  EXPECT_TRUE(remedyContains(*f, "Remove intel_iommu=off from the kernel command line"));
  EXPECT_FALSE(remedyContains(*f, "intel_iommu=on"));
}

TEST(Findings, NoIommuOffFindingWhileAnIommuTranslates) {
  auto intel = statusOf(*intelBareMetal());
  auto smmu = statusOf(*armSmmuV3());
  EXPECT_FALSE(hasFinding(intel, "iommu-off"));
  EXPECT_FALSE(hasFinding(smmu, "iommu-off"));
}

TEST(Findings, CmdlineConflicts) {
  auto amd = amdNewFeatures();
  amd->cmdline("amd_iommu=pt intel_iommu=on");
  auto amdStatus = statusOf(*amd);
  const auto* f = findingById(amdStatus, "cmdline-conflict");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->summary.find("amd_iommu=pt is not a valid option"), std::string::npos);
  EXPECT_NE(f->summary.find("intel_iommu= is given on an AMD host"), std::string::npos);

  auto intel = intelBareMetal();
  intel->cmdline("iommu=pt iommu.passthrough=0");
  auto intelStatus = statusOf(*intel);
  f = findingById(intelStatus, "cmdline-conflict");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->summary.find("iommu.passthrough=0 overrides the earlier iommu=pt"), std::string::npos);
}

TEST(Findings, AreOrderedBySeverityThenId) {
  auto h = thunderboltNic();
  h->cmdline("amd_iommu=off");
  auto ids = statusOf(*h).findings;
  ASSERT_EQ(ids.size(), 3U);
  EXPECT_EQ(ids[0].id, "cmdline-conflict");
  EXPECT_EQ(ids[1].id, "untrusted-bounce");
  EXPECT_EQ(ids[2].id, "default-on");
}

// docs/kernel.md §1.5: on arm64 x86's iommu= and the x86 drivers' options do nothing; no remedy may
// name them. The SMMUv3 unit says arm64 here (the host has no /proc/sys/kernel/arch).
TEST(Findings, OnArm64X86ParametersAreUnknownAndNoRemedyNamesOne) {
  auto h = armSmmuV3();
  h->cmdline("root=/dev/vda1 iommu=off iommu=pt");
  h->pci({.address = "0000:00:02.0",
          .vendor = 0x8086,
          .device = 0x15f3,
          .classCode = 0x020000,
          .driver = "igc",
          .removable = "removable"});
  h->group(2, "DMA\n", {"0000:00:02.0"});
  h->swiotlb(0, 0, 0);
  auto s = statusOf(*h);
  EXPECT_EQ(s.host.kernel.arch, Arch::Arm64);
  // The config's translated default stands: neither iommu=off nor iommu=pt exists on arm64.
  EXPECT_EQ(s.mode.passthrough, false);
  EXPECT_EQ(s.mode.defaultType, DomainType::Dma);
  const auto* f = findingById(s, "cmdline-conflict");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->summary.find("iommu=off is not a parameter of the arm64 kernel"), std::string::npos);
  EXPECT_NE(f->summary.find("iommu=pt is not a parameter of the arm64 kernel"), std::string::npos);
  EXPECT_NE(f->summary.find("iommu.passthrough=1"), std::string::npos);
  EXPECT_EQ(findingIds(s),
            (Ids{"cmdline-conflict", "default-on", "smmu-strict", "untrusted-bounce", "untrusted-no-bounce-buffers"}));
  for (const auto& finding : s.findings) {
    for (const auto& r : finding.remedies) {
      for (const char* x86 : {"iommu=", "intel_iommu", "amd_iommu"}) {
        EXPECT_EQ(r.action.find(x86), std::string::npos) << finding.id << ": " << r.action;
      }
    }
  }
}

// Without an SMMU nothing but the kernel's machine name tells arm64: iommu=off did not turn it off.
TEST(Findings, OnArm64WithoutAnSmmuIommuOffIsNotTheReason) {
  auto h = std::make_unique<FakeHost>("6.1.0-56-arm64");
  h->machine("aarch64");
  h->deviceTree();
  h->cmdline("root=/dev/vda1 iommu=off");
  auto s = statusOf(*h);
  EXPECT_FALSE(s.mode.present);
  EXPECT_FALSE(hasReasonContaining(s.mode, Reason::Source::Cmdline, "iommu=off"));
  EXPECT_TRUE(hasReasonContaining(s.mode, Reason::Source::Firmware, "device tree"));
  const auto* f = findingById(s, "cmdline-conflict");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->summary.find("iommu=off is not a parameter of the arm64 kernel"), std::string::npos);
  // Off, but not by iommu=off: the remedy is the arm64 firmware's, never the x86 parameter.
  const auto* off = findingById(s, "iommu-off");
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(remedyContains(*off, "iommu=off"));
  EXPECT_TRUE(remedyContains(*off, "describes the SMMU"));

  // The same host read as x86 (its machine name says so) is off because of iommu=off.
  h->machine("x86_64");
  auto x86 = statusOf(*h);
  EXPECT_TRUE(hasReasonContaining(x86.mode, Reason::Source::Cmdline, "iommu=off on the command line disables"));
}

TEST(Findings, AVirtioBypassIsANoteOutsideAConfidentialGuest) {
  auto s = statusOf(*virtioGuest());
  const auto* f = findingById(s, "virtio-bypasses-iommu");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::Info);
  EXPECT_EQ(f->devices, (std::vector<std::string>{"0000:00:05.0"}));  // not virtio0, which has the bit
  EXPECT_EQ(f->groups, (std::vector<int>{5}));
  EXPECT_NE(f->summary.find("0000:00:05.0 (virtio1)"), std::string::npos);
  EXPECT_NE(f->summary.find("The hypervisor that emulates them sees the guest's memory anyway"), std::string::npos);
  ASSERT_EQ(f->remedies.size(), 1U);
  EXPECT_NE(f->remedies[0].action.find("iommu_platform=on"), std::string::npos);
  EXPECT_NE(f->remedies[0].action.find("<driver iommu='on'/>"), std::string::npos);
  EXPECT_NE(f->remedies[0].securityCost.find("traps to the hypervisor"), std::string::npos);
}

TEST(Findings, AVirtioBypassIsAnErrorInAConfidentialGuest) {
  for (auto [flags, kind] : {std::pair{"hypervisor sev", "sev"}, std::pair{"hypervisor sev sev_es", "sev-es"},
                             std::pair{"hypervisor sev sev_es sev_snp", "sev-snp"}, std::pair{"tdx_guest", "tdx"}}) {
    auto h = virtioGuest();
    h->cpuFlags(std::string("fpu ") + flags);
    auto s = statusOf(*h);
    const auto* f = findingById(s, "virtio-bypasses-iommu");
    ASSERT_NE(f, nullptr) << kind;
    EXPECT_EQ(f->severity, Severity::Error) << kind;
    EXPECT_NE(f->summary.find(std::string("This guest is ") + kind + ":"), std::string::npos) << f->summary;
  }
}

TEST(Findings, NoVirtioBypassWhenEveryVirtioDeviceHasAccessPlatform) {
  auto h = virtioGuest();
  h->write("/sys/devices/pci0000:00/0000:00:05.0/virtio1/features", std::string(32, '0') + "11" + std::string(30, '0'));
  auto s = statusOf(*h);
  EXPECT_FALSE(hasFinding(s, "virtio-bypasses-iommu"));
}

TEST(Findings, AVirtioBypassWithoutIommuIsIommuOffUnlessTheGuestIsConfidential) {
  auto h = noIommu();
  h->virtio("0000:00:05.0", "virtio1", false);
  h->cpuFlags("fpu hypervisor");
  auto plain = statusOf(*h);
  EXPECT_FALSE(hasFinding(plain, "virtio-bypasses-iommu"));
  EXPECT_TRUE(hasFinding(plain, "iommu-off"));
  h->cpuFlags("fpu hypervisor tdx_guest");
  auto tdx = statusOf(*h);
  const auto* f = findingById(tdx, "virtio-bypasses-iommu");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::Error);
  EXPECT_TRUE(f->groups.empty());
}
}  // namespace findings_test
