#include "core/procfs.hpp"

#include <gtest/gtest.h>

namespace procfs_test {

using namespace iommud::core;

TEST(MountInfo, ReadsDeviceMountPointAndSourceWithOptionalFields) {
  auto m = parseMountInfo(
      "36 35 259:2 / /home/my\\040disk rw,relatime shared:1 master:2 - ext4 /dev/nvme0n1p2 rw\n"
      "37 35 0:22 / /proc rw - proc proc rw\n"
      "garbage\n");
  ASSERT_EQ(m.size(), 2U);
  EXPECT_EQ(m[0].devNum, "259:2");
  EXPECT_EQ(m[0].mountPoint, "/home/my disk");
  EXPECT_EQ(m[0].fsType, "ext4");
  EXPECT_EQ(m[0].source, "/dev/nvme0n1p2");
}

TEST(Swaps, KeepsPartitionsNotFiles) {
  auto s = parseSwaps(
      "Filename\tType\tSize\tUsed\tPriority\n/dev/nvme0n1p3 partition 8388604 0 -2\n"
      "/swapfile file 1048572 0 -3\n");
  EXPECT_EQ(s, (std::vector<std::string>{"nvme0n1p3"}));
}

TEST(Routes, CollectsInterfacesFromBothFamilies) {
  auto r = parseRouteInterfaces("Iface\tDestination\nenp1s0\t00000000\n",
                                "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
                                "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"
                                "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 "
                                "00000000000000000000000000000000 00000100 00000001 00000000 00000001   wlp2s0\n");
  EXPECT_EQ(r, (std::set<std::string>{"enp1s0", "wlp2s0"}));
}

TEST(Inet6, IgnoresLinkLocalAndLoopback) {
  auto a = parseGlobalInet6Interfaces(
      "fe800000000000003a2c4afffe0c1d2e 02 40 20 80     eno1\n"
      "00000000000000000000000000000001 01 80 10 80       lo\n"
      "20010db8000000000000000000000001 03 40 00 00     eno2\n");
  EXPECT_EQ(a, (std::set<std::string>{"eno2"}));
}

TEST(Kconfig, KeepsIommuSymbolsIncludingUnsetOnes) {
  auto c = parseKconfig(
      "CONFIG_INTEL_IOMMU=y\n# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set\nCONFIG_HZ=250\n"
      "CONFIG_SWIOTLB_DYNAMIC=y\n# comment\n",
      isIommuConfigSymbol);
  EXPECT_EQ(c.size(), 3U);
  EXPECT_EQ(c["CONFIG_INTEL_IOMMU"], "y");
  EXPECT_EQ(c["CONFIG_INTEL_IOMMU_DEFAULT_ON"], "n");
  EXPECT_EQ(c["CONFIG_SWIOTLB_DYNAMIC"], "y");
}

TEST(Confidential, TellsTheGuestFromItsCpuFlags) {
  auto flags = [](const std::string& f) { return parseConfidential("processor\t: 0\nflags\t\t: " + f + "\n"); };
  EXPECT_EQ(flags("fpu hypervisor tdx_guest"), Confidential::Tdx);
  EXPECT_EQ(flags("fpu hypervisor sev sev_es sev_snp"), Confidential::SevSnp);
  EXPECT_EQ(flags("fpu hypervisor sev sev_es"), Confidential::SevEs);
  EXPECT_EQ(flags("fpu hypervisor sev"), Confidential::Sev);
  EXPECT_EQ(flags("fpu hypervisor"), Confidential::None);
  // A host that can run SEV guests has the flags without being a guest.
  EXPECT_EQ(flags("fpu sme sev sev_es sev_snp"), Confidential::None);
  EXPECT_EQ(parseConfidential("processor\t: 0\n"), Confidential::Unknown);
}
}  // namespace procfs_test
