#include "core/protections.hpp"

#include <gtest/gtest.h>

#include "support/scenarios.hpp"
#include "unit/test_bytes.hpp"
#include "unit/test_host.hpp"

namespace protections_test {

using namespace iommud;
using namespace iommud::core;
using namespace iommud::testing;
using iommud::test::pciConfigBytes;
using State = Protection::State;

Protection byId(const Protections& p, const std::string& id) {
  for (const auto& x : p.host) {
    if (x.id == id) return x;
  }
  throw std::runtime_error("no protection " + id);
}

Protections of(const FakeHost& h) {
  auto s = statusOf(h);
  return protections(s.host, s.mode);
}

constexpr Acs kIsolating{0x5f, kAcsIsolationFlags};

// twoNvmeOneGroup's path: root port 00:02.0 -> switch 01:00.0 -> downstream ports 02:08.0 and
// 02:10.0 -> one NVMe each. ACS everywhere except where `leaky` says.
std::unique_ptr<FakeHost> nvmeSwitch(const std::string& leaky, size_t size = 4096) {
  auto h = twoNvmeOneGroup();
  h->pciConfig("0000:00:02.0", pciConfigBytes(PcieType::RootPort, false, kIsolating, false, size));
  h->pciConfig("0000:01:00.0", pciConfigBytes(PcieType::Upstream, false, std::nullopt, false, size));
  for (const char* a : {"0000:02:08.0", "0000:02:10.0"}) {
    h->pciConfig(a, pciConfigBytes(PcieType::Downstream, false,
                                   a == leaky ? std::nullopt : std::optional<Acs>(kIsolating), false, size));
  }
  for (const char* a : {"0000:03:00.0", "0000:04:00.0"}) {
    h->pciConfig(a, pciConfigBytes(PcieType::Endpoint, false, std::nullopt, false, size));
  }
  return h;
}

TEST(Protections, PreBootDmaProtectionIsTheDmarOptInFlag) {
  auto on = noIommu();
  on->firmwareTable("DMAR", dmarTable(0x05));
  EXPECT_EQ(byId(of(*on), "pre-boot-dma").state, State::On);
  auto off = noIommu();
  off->firmwareTable("DMAR", dmarTable(0x01));
  auto p = byId(of(*off), "pre-boot-dma");
  EXPECT_EQ(p.state, State::Off);
  EXPECT_FALSE(p.advice.empty());
  // noIommu's table is empty: as unreadable as without root.
  EXPECT_EQ(byId(of(*noIommu()), "pre-boot-dma").state, State::Unknown);
}

TEST(Protections, SaysWhyThunderboltDmaProtectionReadsZeroWhenTheNhiIsInIdentity) {
  auto h = thunderboltNic();
  h->thunderboltDomain("domain0", "user", false);
  h->write("/sys/kernel/iommu_groups/5/type", "identity\n");
  auto p = byId(of(*h), "pre-boot-dma");
  EXPECT_NE(p.text.find("iommu_dma_protection 0"), std::string::npos) << p.text;
  EXPECT_NE(p.text.find("the NHI 0000:00:0d.2 is in identity"), std::string::npos) << p.text;
}

TEST(Protections, InterruptRemappingFromEcapDmarAndTheCommandLine) {
  EXPECT_EQ(byId(of(*intelBareMetal()), "interrupt-remapping").state, State::On);
  auto noFlag = intelBareMetal();
  noFlag->firmwareTable("DMAR", dmarTable(0x00));
  EXPECT_EQ(byId(of(*noFlag), "interrupt-remapping").state, State::Off);
  auto unreadable = intelBareMetal();
  unreadable->firmwareTable("DMAR", "");  // as without root
  EXPECT_EQ(byId(of(*unreadable), "interrupt-remapping").state, State::Unknown);
  auto cmdline = intelBareMetal();
  cmdline->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro intremap=off");
  EXPECT_EQ(byId(of(*cmdline), "interrupt-remapping").state, State::Off);
}

TEST(Protections, X2apicFollowsEimAndTheFirmwaresOptOut) {
  EXPECT_EQ(byId(of(*intelBareMetal()), "x2apic").state, State::On);  // ecap 0xf050da: EIM
  auto optOut = intelBareMetal();
  optOut->firmwareTable("DMAR", dmarTable(0x03));
  EXPECT_EQ(byId(of(*optOut), "x2apic").state, State::Off);
  auto unreadable = intelBareMetal();
  unreadable->firmwareTable("DMAR", "");  // the opt-out is not known without root
  EXPECT_EQ(byId(of(*unreadable), "x2apic").state, State::Unknown);
}

TEST(Protections, PcieAcsOverrideIsAWeakening) {
  auto h = twoNvmeOneGroup();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro pcie_acs_override=downstream,multifunction");
  auto p = byId(of(*h), "acs-isolation");
  EXPECT_EQ(p.state, State::Weakened);
  EXPECT_NE(p.text.find("pcie_acs_override=downstream,multifunction"), std::string::npos);
  EXPECT_EQ(byId(of(*twoNvmeOneGroup()), "acs-isolation").state, State::On);
}

TEST(Protections, NamesThePortWithoutAcsThatMakesDevicesShareAGroup) {
  auto p = of(*nvmeSwitch("0000:02:08.0"));
  ASSERT_EQ(p.shared.size(), 1U);
  EXPECT_EQ(p.shared[0].group, 20);
  EXPECT_EQ(p.shared[0].withoutAcs, (std::vector<std::string>{"0000:02:08.0"}));
  EXPECT_TRUE(p.shared[0].unknown.empty());
  EXPECT_NE(p.shared[0].text.find("no ACS isolation (SV, RR, CR, UF) at 0000:02:08.0"), std::string::npos);
}

TEST(Protections, WithoutRootWhyAGroupIsSharedIsUnknown) {
  auto p = of(*nvmeSwitch("0000:02:08.0", 64));
  ASSERT_EQ(p.shared.size(), 1U);
  EXPECT_TRUE(p.shared[0].withoutAcs.empty());
  EXPECT_EQ(p.shared[0].unknown.size(), 6U);
  EXPECT_NE(p.shared[0].text.find("unknown"), std::string::npos);
}

TEST(Protections, VfioIsViableWhenEveryDeviceIsBoundToVfioOrPcieport) {
  auto p = of(*vfioGroup());
  auto it = std::find_if(p.vfio.begin(), p.vfio.end(), [](const VfioReadiness& v) { return v.group == 2; });
  ASSERT_NE(it, p.vfio.end());
  EXPECT_TRUE(it->viable);
  auto h = vfioGroup();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro intel_iommu=on iommu=pt intremap=off");
  h->pci({.address = "0000:01:00.1",
          .parent = "0000:00:01.0",
          .vendor = 0x10de,
          .device = 0x22ba,
          .classCode = 0x040300,
          .driver = "snd_hda_intel",
          .removable = "fixed"});
  auto q = of(*h);
  it = std::find_if(q.vfio.begin(), q.vfio.end(), [](const VfioReadiness& v) { return v.group == 2; });
  ASSERT_NE(it, q.vfio.end());
  EXPECT_FALSE(it->viable);
  EXPECT_EQ(it->blockers,
            (std::vector<std::string>{"0000:01:00.1 is bound to snd_hda_intel", "no interrupt remapping"}));
}

TEST(Protections, AmdHatDisMeansNoTranslation) {
  auto h = noIommu();
  std::string ivrs = std::string("IVRS") + std::string("\x58\x00\x00\x00\x02\x00", 6) + "AMD   AmdTable" +
                     std::string(12, '\0') + std::string("\x41\x30\x20\x00", 4) + std::string(8, '\0');
  std::string ivhd(40, '\0');
  ivhd[0] = 0x40;
  ivhd[2] = 40;
  ivhd[20] = 0x01;  // HATDis
  h->firmwareTable("IVRS", ivrs + ivhd);
  auto p = byId(of(*h), "host-translation");
  EXPECT_EQ(p.state, State::Off);
  EXPECT_NE(p.text.find("HATDis"), std::string::npos);
}

// Issue 29: "host-translation unknown: no readable IVRS table" on a host whose IOMMU is off.
TEST(Protections, NoIommuInUseMeansNoTranslationWhateverTheTables) {
  auto none = byId(of(*noIommu()), "host-translation");
  EXPECT_EQ(none.state, State::Off);
  EXPECT_EQ(none.text, "no IOMMU is in use: nothing translates DMA");
  EXPECT_NE(none.advice.find("iommu-off"), std::string::npos);
  auto on = byId(of(*intelBareMetal()), "host-translation");
  EXPECT_EQ(on.state, State::On);
  EXPECT_EQ(on.text, "the IOMMU translates DMA");
}

// armSmmuV3 with its interrupt chips as /sys/kernel/irq names them.
std::unique_ptr<FakeHost> armWithIrqChips(const std::vector<std::string>& chips) {
  auto h = armSmmuV3();
  int irq = 10;
  for (const auto& c : chips) h->write("/sys/kernel/irq/" + std::to_string(irq++) + "/chip_name", c + "\n");
  return h;
}

TEST(Protections, OnArm64TheItsIsolatesMsisAndTheX86NotionsDoNotApply) {
  auto p = of(*armWithIrqChips({"GICv3", "ITS-MSI"}));
  EXPECT_EQ(byId(p, "msi-isolation").state, State::On);
  EXPECT_NE(byId(p, "msi-isolation").text.find("ITS-MSI"), std::string::npos);
  EXPECT_EQ(byId(p, "interrupt-remapping").state, State::NotApplicable);
  EXPECT_EQ(byId(p, "x2apic").state, State::NotApplicable);
  EXPECT_EQ(toString(State::NotApplicable), "not-applicable");
  // The MSI-parent names of later kernels: "ITS-" and the device's domain.
  EXPECT_EQ(byId(of(*armWithIrqChips({"GICv3", "ITS-PCI-MSIX-0000:00:01.0"})), "msi-isolation").state, State::On);
}

TEST(Protections, AGicV2mDoesNotIsolateMsisAndBlocksVfio) {
  auto p = of(*armWithIrqChips({"GIC-0", "GICv2m-PCI-MSIX-0000:00:01.0"}));
  EXPECT_EQ(byId(p, "msi-isolation").state, State::Off);
  EXPECT_NE(byId(p, "msi-isolation").advice.find("allow_unsafe_interrupts"), std::string::npos);
  ASSERT_FALSE(p.vfio.empty());
  EXPECT_EQ(p.vfio.front().blockers.back(), "MSIs not isolated");
  // The per-device domains of later kernels are said by their frame and their count.
  const auto many = byId(of(*armWithIrqChips({"GIC-0", "GICv2m-PCI-MSIX-0000:00:01.0", "GICv2m-PCI-MSIX-0000:01:00.0",
                                              "GICv2m-PCI-MSIX-0000:02:00.0"})),
                         "msi-isolation");
  EXPECT_EQ(many.text.substr(0, many.text.find(',')), "MSIs go through GICv2m (3 interrupt domains)") << many.text;
  // No MSI allocated yet: unknown, not off.
  EXPECT_EQ(byId(of(*armWithIrqChips({"GIC-0"})), "msi-isolation").state, State::Unknown);
}

TEST(Protections, MsiIsolationIsArm64sOnly) {
  auto p = of(*twoNvmeOneGroup());
  EXPECT_TRUE(std::none_of(p.host.begin(), p.host.end(), [](const Protection& x) { return x.id == "msi-isolation"; }));
}

}  // namespace protections_test
