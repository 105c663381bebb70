#include "core/pci_config.hpp"

#include <gtest/gtest.h>

#include <string>

#include "unit/test_bytes.hpp"

namespace pci_config_test {

using namespace iommud::core;

std::string config(PcieType type, bool multifunction, std::optional<Acs> acs, bool chained = false) {
  return iommud::test::pciConfigBytes(type, multifunction, acs, chained);
}

constexpr uint16_t kFull = kAcsSourceValidation | kAcsTranslationBlocking | kAcsRequestRedirect |
                           kAcsCompletionRedirect | kAcsUpstreamForwarding | kAcsDirectTranslatedP2p;

TEST(PciConfig, FindsThePcieTypeAndAcsThroughBothCapabilityLists) {
  auto c = parsePciConfig(config(PcieType::RootPort, false, Acs{kFull, kAcsIsolationFlags}, true));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->vendorId, 0x8086);
  EXPECT_EQ(c->deviceId, 0x7a38);
  EXPECT_FALSE(c->multifunction);
  EXPECT_EQ(c->pcieType, static_cast<uint8_t>(PcieType::RootPort));
  ASSERT_TRUE(c->acs);
  EXPECT_EQ(c->acs->capability, kFull);
  EXPECT_EQ(c->acs->control, kAcsIsolationFlags);
  EXPECT_EQ(acsEnabled(*c, kAcsIsolationFlags), true);
}

TEST(PciConfig, ARootPortWithoutAcsDoesNotIsolate) {
  auto c = parsePciConfig(config(PcieType::RootPort, false, std::nullopt));
  EXPECT_FALSE(c->acs);
  EXPECT_EQ(acsEnabled(*c, kAcsIsolationFlags), false);
}

TEST(PciConfig, ADownstreamPortWithRequestRedirectOffDoesNotIsolate) {
  auto c = parsePciConfig(config(PcieType::Downstream, false,
                                 Acs{kFull, kAcsSourceValidation | kAcsCompletionRedirect | kAcsUpstreamForwarding}));
  EXPECT_EQ(acsEnabled(*c, kAcsIsolationFlags), false);
  EXPECT_EQ(acsEnabled(*c, kAcsSourceValidation), true);
}

TEST(PciConfig, FeaturesTheCapabilityLacksCountAsHardWiredExceptEgressControl) {
  // Implements only SV and UF, and turns them on: RR and CR are taken as wired on.
  auto c = parsePciConfig(
      config(PcieType::Downstream, false,
             Acs{kAcsSourceValidation | kAcsUpstreamForwarding, kAcsSourceValidation | kAcsUpstreamForwarding}));
  EXPECT_EQ(acsEnabled(*c, kAcsIsolationFlags), true);
  EXPECT_EQ(acsEnabled(*c, kAcsEgressControl), false);
}

TEST(PciConfig, ASingleFunctionEndpointNeedsNoAcsButAMultiFunctionOneDoes) {
  EXPECT_EQ(acsEnabled(*parsePciConfig(config(PcieType::Endpoint, false, std::nullopt)), kAcsIsolationFlags), true);
  EXPECT_EQ(acsEnabled(*parsePciConfig(config(PcieType::Endpoint, true, std::nullopt)), kAcsIsolationFlags), false);
  EXPECT_EQ(acsEnabled(*parsePciConfig(config(PcieType::Endpoint, true, Acs{kFull, kFull})), kAcsIsolationFlags), true);
}

TEST(PciConfig, BridgesToConventionalPciNeverIsolate) {
  EXPECT_EQ(
      acsEnabled(*parsePciConfig(config(PcieType::PcieToPciBridge, false, Acs{kFull, kFull})), kAcsIsolationFlags),
      false);
  auto conventional = config(PcieType::Endpoint, false, std::nullopt);
  conventional[0x06] = 0;  // no capability list: no PCIe capability
  EXPECT_EQ(acsEnabled(*parsePciConfig(conventional), kAcsIsolationFlags), false);
}

TEST(PciConfig, WithoutRootTheAnswerIsUnknown) {
  // Unprivileged reads of `config` return the first 64 bytes only.
  auto head = parsePciConfig(config(PcieType::RootPort, false, Acs{kFull, kFull}).substr(0, 64));
  ASSERT_TRUE(head);
  EXPECT_FALSE(head->pcieType);
  EXPECT_FALSE(head->extendedRead);
  EXPECT_EQ(acsEnabled(*head, kAcsIsolationFlags), std::nullopt);
  // 256 bytes (a conventional read without the extended space) tell the type but not ACS.
  auto standard = parsePciConfig(config(PcieType::RootPort, false, Acs{kFull, kFull}).substr(0, 256));
  EXPECT_EQ(acsEnabled(*standard, kAcsIsolationFlags), std::nullopt);
  EXPECT_FALSE(parsePciConfig(std::string(63, '\0')));
}

TEST(PciConfig, ALoopInTheCapabilityListsEnds) {
  auto b = config(PcieType::RootPort, false, Acs{kFull, kFull}, true);
  b[0x51] = 0x50;                              // power management points to itself: PCIe is never reached
  iommud::test::put32(b, 0x148, 0x1001000eU);  // not ACS, next at 0x100: a loop through AER
  auto c = parsePciConfig(b);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->acs);
  EXPECT_FALSE(c->pcieType);
}

TEST(PciConfig, NamesEachAcsBit) {
  EXPECT_EQ(acsBitName(kAcsSourceValidation), "SV");
  EXPECT_EQ(acsBitName(kAcsDirectTranslatedP2p), "DT");
  EXPECT_EQ(acsBitName(kAcsEgressControl), "EC");
}

}  // namespace pci_config_test
