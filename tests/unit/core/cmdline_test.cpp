#include "core/cmdline.hpp"

#include <gtest/gtest.h>

#include "core/arch.hpp"

namespace cmdline_test {

using namespace iommud::core;

IommuCmdline interpret(const char* cmdline, Arch arch = Arch::X86) {
  return interpretIommuCmdline(parseCmdline(cmdline), arch);
}

TEST(Cmdline, SplitsLikeTheKernelWithQuotesAndStopsAtDoubleDash) {
  auto p = parseCmdline("BOOT_IMAGE=/vmlinuz quiet  dyndbg=\"file x.c +p\" \"a=b c\" -- init --arg=1");
  ASSERT_EQ(p.size(), 4U);
  EXPECT_EQ(p[0].key, "BOOT_IMAGE");
  EXPECT_EQ(p[0].value, "/vmlinuz");
  EXPECT_EQ(p[1].key, "quiet");
  EXPECT_FALSE(p[1].value);
  EXPECT_EQ(p[2].key, "dyndbg");
  EXPECT_EQ(p[2].value, "file x.c +p");
  EXPECT_EQ(p[3].key, "a");
  EXPECT_EQ(p[3].value, "b c");
}

TEST(Cmdline, KernelBoolAcceptsWhatKstrtoboolAccepts) {
  for (const char* t : {"1", "y", "Y", "yes", "t", "true", "on", "ON"}) EXPECT_EQ(parseKernelBool(t), true) << t;
  for (const char* f : {"0", "n", "N", "no", "f", "false", "off", "Off"}) EXPECT_EQ(parseKernelBool(f), false) << f;
  for (const char* bad : {"", "2", "o", "maybe", "x"}) EXPECT_FALSE(parseKernelBool(bad)) << bad;
}

TEST(Cmdline, TheLastOfIommuPtAndPassthroughWins) {
  auto c = interpret("iommu=pt iommu.passthrough=0");
  EXPECT_EQ(c.passthrough, false);
  EXPECT_EQ(c.passthroughBy, "iommu.passthrough=0");
  ASSERT_EQ(c.issues.size(), 1U);
  EXPECT_NE(c.issues[0].message.find("overrides the earlier iommu=pt"), std::string::npos);

  auto d = interpret("iommu.passthrough=1 iommu=nopt");
  EXPECT_EQ(d.passthrough, false);
  EXPECT_EQ(d.passthroughBy, "iommu=nopt");
}

TEST(Cmdline, LegacyStrictOptionsBeatIommuStrictWhateverTheOrder) {
  auto c = interpret("intel_iommu=on,strict iommu.strict=0");
  EXPECT_TRUE(c.legacyStrict);
  EXPECT_EQ(c.strict, false);
  EXPECT_EQ(c.intelOn, true);
  ASSERT_EQ(c.issues.size(), 1U);
  EXPECT_NE(c.issues[0].message.find("takes precedence"), std::string::npos);
  EXPECT_TRUE(interpret("amd_iommu=fullflush").legacyStrict);
}

TEST(Cmdline, AmdIommuPtIsNotAnOption) {
  auto c = interpret("amd_iommu=pt");
  EXPECT_FALSE(c.passthrough);
  ASSERT_EQ(c.issues.size(), 1U);
  EXPECT_NE(c.issues[0].message.find("amd_iommu=pt is not a valid option"), std::string::npos);
  EXPECT_NE(c.issues[0].message.find("iommu=pt"), std::string::npos);
}

TEST(Cmdline, AmdIommuOnIsIgnoredAndSaysTheIommuIsOnByDefault) {
  auto c = interpret("amd_iommu=on");
  ASSERT_EQ(c.issues.size(), 1U);
  EXPECT_NE(c.issues[0].message.find("amd_iommu=on is not a valid option"), std::string::npos);
  EXPECT_NE(c.issues[0].message.find("on by default when the firmware has an IVRS table"), std::string::npos);
  EXPECT_FALSE(c.amdOff);
}

TEST(Cmdline, InvalidBooleansAreIgnoredAndReported) {
  auto c = interpret("iommu.strict=maybe iommu.passthrough=2");
  EXPECT_FALSE(c.strict);
  EXPECT_FALSE(c.passthrough);
  EXPECT_EQ(c.issues.size(), 2U);
}

TEST(Cmdline, X86IommuWordsAreMatchedByPrefixAsTheKernelDoes) {
  auto c = interpret("iommu=off,pt");
  EXPECT_TRUE(c.iommuOff);
  EXPECT_EQ(c.passthrough, true);
  EXPECT_EQ(c.issues.size(), 1U);  // pt has no effect with off
  EXPECT_EQ(interpret("iommu=bogus").issues.size(), 1U);
  EXPECT_TRUE(interpret("iommu=force").iommuForce);
}

TEST(Cmdline, DashesAndUnderscoresAreTheSameInNames) {
  auto c = interpret("intel-iommu=off amd_iommu=off swiotlb=noforce mem_encrypt=on");
  EXPECT_EQ(c.intelOn, false);
  EXPECT_TRUE(c.amdOff);
  EXPECT_TRUE(c.swiotlbNoforce);
  EXPECT_EQ(c.memEncrypt, true);
  EXPECT_EQ(c.params.size(), 4U);
}

TEST(Cmdline, KeepsIommuParamsAndIgnoresTheRest) {
  auto c = interpret("root=UUID=1 quiet iommu.strict=1 splash");
  EXPECT_EQ(c.params, (std::vector<std::string>{"iommu.strict=1"}));
  EXPECT_EQ(c.strict, true);
  EXPECT_TRUE(c.issues.empty());
}

// docs/kernel.md §1.5: iommu= is x86's; intel_iommu= and amd_iommu= belong to x86-only drivers.
TEST(Cmdline, OnArm64TheX86ParametersSetNothingAndSaySo) {
  auto c = interpret("iommu=off iommu=pt intel_iommu=strict amd_iommu=off", Arch::Arm64);
  EXPECT_FALSE(c.iommuOff);
  EXPECT_FALSE(c.passthrough);
  EXPECT_FALSE(c.legacyStrict);
  EXPECT_FALSE(c.amdOff);
  EXPECT_FALSE(c.intelGiven);
  EXPECT_FALSE(c.amdGiven);
  EXPECT_EQ(c.params.size(), 4U);
  ASSERT_EQ(c.issues.size(), 4U);
  EXPECT_EQ(c.issues[0].param, "iommu=off");
  EXPECT_NE(c.issues[0].message.find("iommu=off is not a parameter of the arm64 kernel"), std::string::npos);
  EXPECT_NE(c.issues[0].message.find("iommu.passthrough=1"), std::string::npos);
  EXPECT_NE(c.issues[1].message.find("iommu.passthrough=1"), std::string::npos);
  EXPECT_NE(c.issues[2].message.find("the VT-d driver is x86-only"), std::string::npos);
  EXPECT_NE(c.issues[2].message.find("iommu.strict=1"), std::string::npos);
  EXPECT_NE(c.issues[3].message.find("the AMD-Vi driver is x86-only"), std::string::npos);
}

TEST(Cmdline, TheGenericParametersWorkOnEveryArchitecture) {
  for (Arch arch : {Arch::Unknown, Arch::X86, Arch::Arm64, Arch::Other}) {
    auto c = interpret("iommu.passthrough=1 iommu.strict=0", arch);
    EXPECT_EQ(c.passthrough, true) << toString(arch);
    EXPECT_EQ(c.strict, false) << toString(arch);
    EXPECT_TRUE(c.issues.empty()) << toString(arch);
  }
}

TEST(Cmdline, AnUnknownArchitectureReadsAsX86AndAnotherOnesIommuIsLeftAlone) {
  EXPECT_TRUE(interpret("iommu=off", Arch::Unknown).iommuOff);
  EXPECT_EQ(interpret("iommu=pt", Arch::Unknown).passthrough, true);
  // powerpc's iommu=nobypass is its own: neither read as x86's nor called unknown.
  auto ppc = interpret("iommu=nobypass iommu=pt", Arch::Other);
  EXPECT_FALSE(ppc.passthrough);
  EXPECT_TRUE(ppc.issues.empty());
  auto intel = interpret("intel_iommu=on", Arch::Other);
  EXPECT_FALSE(intel.intelOn);
  ASSERT_EQ(intel.issues.size(), 1U);
  EXPECT_NE(intel.issues[0].message.find("not a parameter of this architecture's kernel"), std::string::npos);
}

TEST(Arch, FromTheMachineName) {
  EXPECT_EQ(archFromMachine("x86_64\n"), Arch::X86);
  EXPECT_EQ(archFromMachine("i686"), Arch::X86);
  EXPECT_EQ(archFromMachine("aarch64"), Arch::Arm64);
  EXPECT_EQ(archFromMachine("ppc64le"), Arch::Other);
  EXPECT_EQ(archFromMachine("i786"), Arch::Other);
  EXPECT_EQ(archFromMachine(""), Arch::Unknown);
}

}  // namespace cmdline_test
