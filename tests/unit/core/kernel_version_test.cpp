#include "core/kernel_version.hpp"

#include <gtest/gtest.h>

namespace kernel_version_test {

using namespace iommud::core;

TEST(KernelVersion, ParsesReleaseStrings) {
  EXPECT_EQ(parseKernelVersion("6.1.0-56-amd64"), (KernelVersion{6, 1, 0}));
  EXPECT_EQ(parseKernelVersion("6.12.38+deb12-amd64"), (KernelVersion{6, 12, 38}));
  EXPECT_EQ(parseKernelVersion("6.18"), (KernelVersion{6, 18, 0}));
  EXPECT_EQ(parseKernelVersion("5.15.0-91-generic"), (KernelVersion{5, 15, 0}));
  EXPECT_FALSE(parseKernelVersion("linux"));
  EXPECT_FALSE(parseKernelVersion("6"));
  EXPECT_FALSE(parseKernelVersion("99999999.1"));
}

TEST(KernelVersion, FindsDebianUpstreamInProcVersion) {
  auto u = upstreamVersion("6.1.0-56-amd64",
                           "Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian "
                           "12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP "
                           "PREEMPT_DYNAMIC Debian 6.1.192-2 (2025-08-20)",
                           "");
  EXPECT_EQ(u.version, (KernelVersion{6, 1, 192}));
  EXPECT_EQ(u.source, VersionSource::ProcVersion);
  auto bpo = upstreamVersion("6.12.38+deb12-amd64", "... #1 SMP PREEMPT_DYNAMIC Debian 6.12.38-1~deb12u1 (2025)", "");
  EXPECT_EQ(bpo.version, (KernelVersion{6, 12, 38}));
}

TEST(KernelVersion, PrefersUbuntuVersionSignature) {
  auto u = upstreamVersion("5.15.0-91-generic", "Linux version 5.15.0-91-generic (buildd@lcy02) #101-Ubuntu SMP",
                           "Ubuntu 5.15.0-91.101-generic 5.15.131\n");
  EXPECT_EQ(u.version, (KernelVersion{5, 15, 131}));
  EXPECT_EQ(u.source, VersionSource::VersionSignature);
}

TEST(KernelVersion, FallsBackToTheRelease) {
  auto u = upstreamVersion("6.18.44-fc-v595", "Linux version 6.18.44-fc-v595 (builder@sandboxing) #1 SMP", "");
  EXPECT_EQ(u.version, (KernelVersion{6, 18, 44}));
  EXPECT_EQ(u.source, VersionSource::Release);
  EXPECT_EQ(upstreamVersion("custom", "", "").source, VersionSource::Unknown);
}

TEST(VersionSet, MatchesTheIotlbSyncMapRangesAtTheirEdges) {
  auto s = VersionSet::parse(">=6.10,<6.12.43 || >=6.13,<6.15.11 || >=6.16,<6.16.2");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->contains({6, 9, 12}));
  EXPECT_TRUE(s->contains({6, 10, 0}));
  EXPECT_TRUE(s->contains({6, 12, 42}));
  EXPECT_FALSE(s->contains({6, 12, 43}));
  EXPECT_TRUE(s->contains({6, 13, 0}));
  EXPECT_TRUE(s->contains({6, 14, 11}));
  EXPECT_TRUE(s->contains({6, 15, 10}));
  EXPECT_FALSE(s->contains({6, 15, 11}));
  EXPECT_TRUE(s->contains({6, 16, 1}));
  EXPECT_FALSE(s->contains({6, 16, 2}));
  EXPECT_FALSE(s->contains({6, 17, 0}));
}

TEST(VersionSet, AcceptsEveryOperatorAndBareVersions) {
  EXPECT_TRUE(VersionSet::parse("6.1")->contains({6, 1, 0}));
  EXPECT_TRUE(VersionSet::parse("==6.1.5")->contains({6, 1, 5}));
  EXPECT_TRUE(VersionSet::parse("<=6.1.5")->contains({6, 1, 5}));
  EXPECT_FALSE(VersionSet::parse(">6.1.5")->contains({6, 1, 5}));
  EXPECT_TRUE(VersionSet::parse("> 6.1.5 , < 7.0")->contains({6, 2, 0}));
}

TEST(VersionSet, ReportsTheColumnOfAMalformedRange) {
  auto a = VersionSet::parse(">=6.10,,<6.12");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "column 8: expected a version bound such as >=6.10");
  auto b = VersionSet::parse(">=6.x");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message, "column 3: expected a kernel version such as 6.12.43");
  auto c = VersionSet::parse(">=6.1 <6.2");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "column 7: expected ',' or '||' between version bounds");
  EXPECT_FALSE(VersionSet::parse(""));
  EXPECT_FALSE(VersionSet::parse(">=6.1 ||"));
}

}  // namespace kernel_version_test
