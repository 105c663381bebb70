#include "core/caps.hpp"

#include <gtest/gtest.h>

namespace caps_test {

using namespace iommud::core;

TEST(IntelCaps, DecodesTheQemuGuestWithCachingMode) {
  IntelCaps c{parseHex64("d2008c22260286\n").value(), parseHex64("f00f4a").value()};
  EXPECT_TRUE(c.cachingMode());
  EXPECT_FALSE(c.rwbf());
  EXPECT_TRUE(c.pageSelectiveInvalidation());
  EXPECT_EQ(c.superPageSizes(), (std::vector<std::string>{"2M", "1G"}));
  EXPECT_EQ(c.numDomainsLog2(), 16U);  // ND=6: 65536 domains
  EXPECT_EQ(c.mgaw(), 39U);
  EXPECT_TRUE(c.passThrough());
  EXPECT_FALSE(c.snoopControl());
  EXPECT_TRUE(c.queuedInvalidation());
  EXPECT_TRUE(c.interruptRemapping());
  EXPECT_FALSE(c.scalableMode());
  EXPECT_FALSE(c.firstLevelTranslation());
  EXPECT_FALSE(c.secondLevelTranslation());
}

TEST(IntelCaps, DecodesBareMetalWithoutCachingModeOrRwbf) {
  IntelCaps c{parseHex64("d2008c40660462").value(), parseHex64("f050da").value()};
  EXPECT_FALSE(c.cachingMode());
  EXPECT_FALSE(c.rwbf());
  EXPECT_TRUE(c.passThrough());
  EXPECT_TRUE(c.snoopControl());
}

TEST(IntelCaps, ReadsHighBitsThatDoNotFitADouble) {
  // Scalable mode (ecap 43) and first/second-level translation (47/46), and cap bit 63.
  IntelCaps c{parseHex64("0x8000000000000090").value(), parseHex64("0xc80000000000").value()};
  EXPECT_TRUE(c.cachingMode());
  EXPECT_TRUE(c.rwbf());
  EXPECT_TRUE(c.scalableMode());
  EXPECT_TRUE(c.firstLevelTranslation());
  EXPECT_TRUE(c.secondLevelTranslation());
}

TEST(ParseHex64, RejectsWhatIsNotARegister) {
  EXPECT_FALSE(parseHex64(""));
  EXPECT_FALSE(parseHex64("0x"));
  EXPECT_FALSE(parseHex64("12g4"));
  EXPECT_FALSE(parseHex64("11112222333344445"));  // 17 digits overflow 64 bits
  EXPECT_EQ(parseHex64("  ffffffffffffffff \n").value(), ~uint64_t{0});
}

TEST(AmdFeatures, ParsesTheFormatBefore60) {
  auto f = parseAmdFeatures("58f77ef22294ade\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->efr, 0x58f77ef22294adeULL);
  EXPECT_FALSE(f->efr2);
}

TEST(AmdFeatures, ParsesEfr2ColonEfrSince60) {
  auto f = parseAmdFeatures("1:25bf7ef22294ade");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->efr, 0x25bf7ef22294adeULL);
  EXPECT_EQ(f->efr2, 1U);
  EXPECT_FALSE(parseAmdFeatures("1:"));
  EXPECT_FALSE(parseAmdFeatures("zz:1"));
}

TEST(AmdCaps, DecodesNpCacheIotlbAndEfrSupport) {
  AmdCaps virt{0x0d190b0f, 0, std::nullopt};
  EXPECT_TRUE(virt.npCache());
  EXPECT_TRUE(virt.iotlb());
  EXPECT_TRUE(virt.efrSupported());
  AmdCaps bare{0x00190b0f, 0x58f77ef22294adeULL, std::nullopt};
  EXPECT_FALSE(bare.npCache());
  EXPECT_FALSE(bare.iotlb());
  EXPECT_TRUE(bare.guestTranslation());
  EXPECT_TRUE(bare.ppr());
}

TEST(RwbfQuirk, ListsTheMobile4SeriesChipsetsOnly) {
  EXPECT_TRUE(needsRwbfQuirk(0x8086, 0x2a40));
  EXPECT_TRUE(needsRwbfQuirk(0x8086, 0x2e90));
  EXPECT_FALSE(needsRwbfQuirk(0x8086, 0x2e50));
  EXPECT_FALSE(needsRwbfQuirk(0x1022, 0x2a40));  // an AMD id that happens to match
  EXPECT_FALSE(needsRwbfQuirk(0x8086, 0x0d57));
}

}  // namespace caps_test
