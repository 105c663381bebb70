#include "core/acpi_tables.hpp"

#include <gtest/gtest.h>

#include "unit/test_bytes.hpp"

namespace acpi_tables_test {

using namespace iommud::core;
using iommud::test::hexBytes;

// The common ACPI header of 36 bytes: signature, length, revision, checksum, OEM ids.
std::string header(std::string_view signature, std::string_view lengthLe) {
  return std::string(signature) + hexBytes(lengthLe) +
         hexBytes("01 00  424f43485320  4258504320202020  01000000  42585043  01000000");
}

// QEMU's q35 DMAR for -device intel-iommu,intremap=on,aw-bits=39: width 39 - 1, INTR_REMAP, one
// include-all DRHD at 0xfed90000 (laid out as hw/i386/acpi-build.c build_dmar_q35 writes it).
std::string qemuDmar(uint8_t flags) {
  std::string t = header("DMAR", "40000000");
  t += static_cast<char>(0x26);
  t += static_cast<char>(flags);
  t += hexBytes("00000000000000000000");
  t += hexBytes("0000 1000 01 00 0000 0000d9fe00000000");
  return t;
}

TEST(Dmar, DecodesQemusInterruptRemappingFlag) {
  auto d = parseDmar(qemuDmar(0x01));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->hostAddressWidth, 39U);
  EXPECT_TRUE(d->interruptRemapping());
  EXPECT_FALSE(d->x2apicOptOut());
  EXPECT_FALSE(d->platformOptIn());
}

TEST(Dmar, DecodesEachFlagBitByItself) {
  EXPECT_TRUE(parseDmar(qemuDmar(0x02))->x2apicOptOut());
  EXPECT_FALSE(parseDmar(qemuDmar(0x02))->interruptRemapping());
  EXPECT_TRUE(parseDmar(qemuDmar(0x04))->platformOptIn());
  EXPECT_FALSE(parseDmar(qemuDmar(0x04))->x2apicOptOut());
  EXPECT_EQ(parseDmar(qemuDmar(0x07))->flags, 0x07);
}

TEST(Dmar, RefusesAnotherTableOrATruncatedOne) {
  auto t = qemuDmar(0x04);
  EXPECT_FALSE(parseDmar("IVRS" + t.substr(4)));
  EXPECT_FALSE(parseDmar(t.substr(0, 37)));  // the flags byte is missing
  EXPECT_TRUE(parseDmar(t.substr(0, 38)));
  EXPECT_FALSE(parseDmar(""));
}

TEST(Dmar, RefusesALengthFieldShorterThanTheFixedPart) {
  auto t = qemuDmar(0x04);
  t[4] = 0x20;  // 32 bytes: the header does not even fit
  EXPECT_FALSE(parseDmar(t));
}

// An IVRS as a Ryzen system's firmware ships it: IVinfo 0x00203041 (EFRSup, PA 48, VA 64), one
// IVHD of type 0x10 (flags 0xb0, IOMMU at 00:00.2, MMIO 0xfd300000, feature reporting
// 0x80048f6f) without device entries; `extra` subtables follow.
std::string ryzenIvrs(std::string_view ivinfo, const std::string& extra = "") {
  std::string body = hexBytes(ivinfo) + hexBytes("0000000000000000");
  body += hexBytes("10 b0 1800 0200 4000 0000 30fd 0000 0000 0000 0000 6f8f0480");
  body += extra;
  size_t length = 36 + body.size();
  std::string lengthLe{static_cast<char>(length & 0xff), static_cast<char>(length >> 8), 0, 0};
  std::string h = header("IVRS", "00000000");
  h.replace(4, 4, lengthLe);
  return h + body;
}

// An IVHD of type 0x11 or 0x40 (40 bytes) with the given attributes and EFR.
std::string ivhd40(uint8_t type, std::string_view attributesLe, std::string_view efrLe) {
  std::string s{static_cast<char>(type)};
  s += hexBytes("b0 2800 0200 4000 0000 30fd 0000 0000 0000 0000");
  s += hexBytes(attributesLe);
  s += hexBytes(efrLe);
  s += hexBytes("0000000000000000");
  return s;
}

TEST(Ivrs, DecodesIvinfoOfARyzenTable) {
  auto i = parseIvrs(ryzenIvrs("41302000"));
  ASSERT_TRUE(i);
  EXPECT_EQ(i->ivinfo, 0x00203041U);
  EXPECT_TRUE(i->efrSupported());
  EXPECT_FALSE(i->dmaRemapOptIn());
  EXPECT_EQ(i->physicalAddressSize(), 48U);
  EXPECT_EQ(i->virtualAddressSize(), 64U);
  ASSERT_EQ(i->ivhds.size(), 1U);
  EXPECT_EQ(i->ivhds[0].type, 0x10);
  EXPECT_EQ(i->ivhds[0].deviceId, 0x0002);
  EXPECT_EQ(i->ivhds[0].attributes, 0x80048f6fU);
  EXPECT_FALSE(i->ivhds[0].efr);
  EXPECT_EQ(i->kernelIvhdType(), 0x10);
}

TEST(Ivrs, ReadsTheDmaRemapBitAsPreBootProtection) {
  EXPECT_TRUE(parseIvrs(ryzenIvrs("43302000"))->dmaRemapOptIn());
}

TEST(Ivrs, ReadsHatDisOnlyFromTheIvhdTypeTheKernelUses) {
  // Bit 0 of a type 0x10 header is feature reporting, not HATDis.
  EXPECT_FALSE(parseIvrs(ryzenIvrs("41302000"))->hostTranslationDisabled());
  auto both = parseIvrs(ryzenIvrs(
      "41302000", ivhd40(0x11, "01000000", "0400000000000000") + ivhd40(0x40, "00000000", "0000000000000000")));
  ASSERT_TRUE(both);
  ASSERT_EQ(both->ivhds.size(), 3U);
  EXPECT_EQ(both->kernelIvhdType(), 0x40);
  EXPECT_FALSE(both->hostTranslationDisabled());  // 0x11 has it, but the kernel reads 0x40
  EXPECT_TRUE(both->ivhds[1].hostTranslationDisabled());
  EXPECT_TRUE(both->ivhds[1].x2apic());
  EXPECT_FALSE(both->ivhds[2].x2apic());

  auto only = parseIvrs(ryzenIvrs("41302000", ivhd40(0x11, "01000000", "0000000000000000")));
  EXPECT_TRUE(only->hostTranslationDisabled());
}

TEST(Ivrs, SkipsMemoryDefinitionsAndStopsAtATruncatedSubtable) {
  std::string ivmd = hexBytes("21 08 2000 0000 0000 0000 000000000000 0000000000000000 0000000000000000");
  auto i = parseIvrs(ryzenIvrs("41302000", ivmd + ivhd40(0x11, "01000000", "00")));
  ASSERT_TRUE(i);
  EXPECT_EQ(i->ivhds.size(), 1U);  // the 0x11 entry is cut short by the table's end
  auto zero = parseIvrs(ryzenIvrs("41302000", hexBytes("40 00 0000")));
  ASSERT_TRUE(zero);  // a zero length ends the walk instead of looping
  EXPECT_EQ(zero->ivhds.size(), 1U);
}

}  // namespace acpi_tables_test
