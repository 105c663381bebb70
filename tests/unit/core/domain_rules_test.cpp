// The kernel's domain rules (core/domain_rules): iommu_group_store_type() per version, check by
// check in the kernel's order (docs/kernel.md §2.2).
#include "core/domain_rules.hpp"

#include <gtest/gtest.h>

#include <cerrno>

namespace domain_rules_test {

using namespace iommud::core;

const KernelVersion k419{4, 19, 0};
const KernelVersion k511{5, 11, 0};
const KernelVersion k61{6, 1, 140};
const KernelVersion k64{6, 4, 0};
const KernelVersion k612{6, 12, 48};

GroupAtWrite group(DomainType current, std::vector<GroupAtWrite::Member> members) {
  GroupAtWrite g;
  g.current = current;
  g.members = std::move(members);
  return g;
}

GroupAtWrite::Member bound(std::string driver) {
  return GroupAtWrite::Member{std::move(driver), false, std::nullopt};
}

GroupAtWrite::Member unbound() {
  return GroupAtWrite::Member{};
}

TypeWriteVerdict write(const KernelVersion& v, const GroupAtWrite& g, std::string_view text) {
  return judgeTypeWrite(domainRules(v), g, text);
}

TEST(DomainRules, BeforeLinux64EvenTheLiveChangeIsRefusedForAGroupOfSeveralDevices) {
  // What Debian's 6.1 did with the NVMe pair's group of three (tests/vm, apply): EINVAL.
  auto pair = group(DomainType::Dma, {unbound(), bound("nvme"), bound("nvme")});
  auto v = write(k61, pair, "DMA-FQ");
  EXPECT_EQ(v.check, TypeWriteCheck::SeveralDevices);
  EXPECT_EQ(v.error, EINVAL);
  EXPECT_EQ(v.result, DomainType::Dma);
  // 6.4 takes the live path before it looks at the group.
  auto w = write(k64, pair, "DMA-FQ");
  EXPECT_TRUE(w.taken());
  EXPECT_TRUE(w.live);
  EXPECT_EQ(w.result, DomainType::DmaFq);
}

TEST(DomainRules, TheLiveChangeOfOneDeviceKeepsItsDriverBoundSince515) {
  auto solo = group(DomainType::Dma, {bound("nvme")});
  auto v = write(k61, solo, "DMA-FQ\n");
  EXPECT_TRUE(v.taken());
  EXPECT_TRUE(v.live);
  EXPECT_EQ(write(k511, solo, "DMA-FQ").check, TypeWriteCheck::UnknownType);  // no DMA-FQ before 5.15
  EXPECT_EQ(write(k419, solo, "DMA").check, TypeWriteCheck::ReadOnly);
  EXPECT_EQ(write(k419, solo, "DMA").error, EACCES);
}

TEST(DomainRules, ABoundDriverIsEbusyBefore64AndEpermSince) {
  auto solo = group(DomainType::Dma, {bound("nvme")});
  EXPECT_EQ(write(k61, solo, "identity").error, EBUSY);
  EXPECT_EQ(write(k612, solo, "identity").error, EPERM);
  // Back from DMA-FQ is never live.
  EXPECT_EQ(write(k612, group(DomainType::DmaFq, {bound("nvme")}), "DMA").error, EPERM);
  // pcieport holds no DMA ownership: since 6.4 (owner_cnt) it may stay bound, before (device_is_bound) not.
  auto port = group(DomainType::Dma, {bound("pcieport")});
  EXPECT_TRUE(write(k612, port, "identity").taken());
  EXPECT_EQ(write(k61, port, "identity").error, EBUSY);
  // A group without devices: EPERM since 6.4, the device count before.
  EXPECT_EQ(write(k612, group(DomainType::Dma, {}), "identity").error, EPERM);
  EXPECT_EQ(write(k61, group(DomainType::Dma, {}), "identity").check, TypeWriteCheck::SeveralDevices);
}

TEST(DomainRules, AnUntrustedDeviceGetsOnlyDmaButTheLiveChangeSkipsTheCheckSince64) {
  GroupAtWrite::Member nic{"atlantic", true, std::nullopt};
  auto g = group(DomainType::Dma, {nic});
  EXPECT_EQ(write(k61, g, "DMA-FQ").check, TypeWriteCheck::DeviceForbids);
  EXPECT_TRUE(write(k612, g, "DMA-FQ").live);  // iommud's own rule refuses it (core::prepareDomainChange)
  g.members[0].driver.reset();
  EXPECT_EQ(write(k612, g, "identity").check, TypeWriteCheck::DeviceForbids);
  EXPECT_EQ(write(k612, g, "auto").result, DomainType::Dma);
}

TEST(DomainRules, TheCapabilityAndTheStringAreCheckedBeforeTheGroup) {
  auto g = group(DomainType::Dma, {bound("nvme"), bound("nvme")});
  g.capable = false;
  EXPECT_EQ(write(k61, g, "DMA-FQ").error, EACCES);
  g.capable = true;
  EXPECT_EQ(write(k61, g, "passthrough").check, TypeWriteCheck::UnknownType);
  EXPECT_EQ(write(k61, g, "blocked").check, TypeWriteCheck::UnknownType);
  g.current.reset();
  EXPECT_EQ(write(k612, g, "DMA").check, TypeWriteCheck::NoDefaultDomain);
}

TEST(DomainRules, TheWayOfAChangeSaysWhetherDriversMustGo) {
  auto pair = group(DomainType::Dma, {bound("pcieport"), bound("nvme"), bound("nvme")});
  auto live = typeChangeWay(domainRules(k612), pair, DomainType::DmaFq);
  EXPECT_TRUE(live.verdict.live);
  EXPECT_FALSE(live.unbindFirst);
  auto rebind = typeChangeWay(domainRules(k612), pair, DomainType::Identity);
  EXPECT_TRUE(rebind.verdict.taken());
  EXPECT_TRUE(rebind.unbindFirst);
  auto old = typeChangeWay(domainRules(k61), pair, DomainType::DmaFq);
  EXPECT_EQ(old.verdict.check, TypeWriteCheck::SeveralDevices);
  const auto text = describeRefusal(old.verdict, 20, 3, DomainType::DmaFq, k61);
  EXPECT_NE(text.find("only Linux 6.4 and later change the type of a group of several devices"), std::string::npos)
      << text;
  EXPECT_NE(text.find("not even DMA -> DMA-FQ"), std::string::npos) << text;
  // An unknown version is judged by the newest rules.
  EXPECT_TRUE(typeChangeWay(domainRules(std::nullopt), pair, DomainType::DmaFq).verdict.live);
}

}  // namespace domain_rules_test
