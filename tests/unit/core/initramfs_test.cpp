#include "core/initramfs.hpp"

#include <gtest/gtest.h>

namespace initramfs_test {

using iommud::core::canonicalModuleName;
using iommud::core::Initramfs;
using iommud::core::initramfsRebuildCommand;
using iommud::core::parseInitramfsListing;

constexpr const char* kRelease = "6.1.0-18-amd64";

// `lsinitramfs /boot/initrd.img-6.1.0-18-amd64` on Debian 12: the early microcode archive, then
// the main one (shortened).
constexpr const char* kDebianListing = R"(.
kernel
kernel/x86
kernel/x86/microcode
kernel/x86/microcode/GenuineIntel.bin
.
bin
conf
conf/initramfs.conf
etc/modprobe.d
etc/modprobe.d/iommud-nvme.conf
lib
usr/lib/modules/6.1.0-18-amd64
usr/lib/modules/6.1.0-18-amd64/kernel/drivers/nvme/host/nvme.ko
usr/lib/modules/6.1.0-18-amd64/kernel/drivers/nvme/host/nvme-core.ko
usr/lib/modules/6.1.0-18-amd64/kernel/drivers/net/ethernet/intel/e1000e/e1000e.ko.xz
usr/lib/modules/6.1.0-18-amd64/kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko.zst
usr/lib/modules/6.1.0-18-amd64/updates/dkms/zfs.ko.gz
usr/lib/modules/6.1.0-18-amd64/modules.dep
usr/lib/modules/6.1.0-18-amd64/modules.builtin
usr/sbin/modprobe
)";

TEST(InitramfsListing, FindsEveryCompressionOfModuleInADebianImage) {
  auto l = parseInitramfsListing(kDebianListing, kRelease);
  EXPECT_EQ(l.entries, 21U);
  EXPECT_EQ(l.modules, (std::set<std::string>{"e1000e", "mlx5_core", "nvme", "nvme_core", "zfs"}));
}

TEST(InitramfsListing, NamesModulesAsTheKernelDoes) {
  auto l = parseInitramfsListing("lib/modules/6.1.0-18-amd64/kernel/drivers/net/mlx4-en.ko\n", kRelease);
  EXPECT_EQ(l.modules, std::set<std::string>{"mlx4_en"});
  EXPECT_EQ(canonicalModuleName("nvme-core"), "nvme_core");
  EXPECT_EQ(canonicalModuleName("atlantic"), "atlantic");
}

TEST(InitramfsListing, ReadsLibModulesOfOlderImagesAndLeadingSlashesOrDots) {
  auto l = parseInitramfsListing(
      "lib/modules/6.1.0-18-amd64/kernel/a.ko\n"
      "./lib/modules/6.1.0-18-amd64/kernel/b.ko\n"
      "/usr/lib/modules/6.1.0-18-amd64/kernel/c.ko.xz\n",
      kRelease);
  EXPECT_EQ(l.modules, (std::set<std::string>{"a", "b", "c"}));
}

TEST(InitramfsListing, IgnoresOtherReleasesAndFilesThatAreNoModules) {
  auto l = parseInitramfsListing(
      "usr/lib/modules/6.1.0-17-amd64/kernel/drivers/nvme/host/nvme.ko\n"
      "usr/lib/modules/6.1.0-18-amd64-rt/kernel/drivers/nvme/host/nvme.ko\n"
      "usr/lib/modules/6.1.0-18-amd64/kernel/drivers/nvme/host/nvme.ko.sig\n"
      "usr/lib/modules/6.1.0-18-amd64/.ko\n"
      "usr/share/doc/lib/modules/6.1.0-18-amd64/x.ko\n"
      "usr/lib/firmware/nvme.ko\n",
      kRelease);
  EXPECT_EQ(l.entries, 6U);
  EXPECT_TRUE(l.modules.empty());
}

TEST(InitramfsListing, ReadsDracutsLongListingWherePathsComeLast) {
  // `lsinitrd /boot/initramfs-6.1.0-18-amd64.img`: a header, then `cpio -tv` lines.
  auto l = parseInitramfsListing(
      "Image: /boot/initramfs-6.1.0-18-amd64.img: 31M\n"
      "========================================================================\n"
      "Version: dracut-059-4.fc39\n"
      "========================================================================\n"
      "lrwxrwxrwx   1 root     root            7 Jan 10 12:00 lib -> usr/lib\n"
      "lrwxrwxrwx   1 root     root           23 Jan 10 12:00 usr/lib/modules/6.1.0-18-amd64/kernel/x.ko -> y.ko\n"
      "-rw-r--r--   1 root     root        61234 Jan 10 12:00 "
      "usr/lib/modules/6.1.0-18-amd64/kernel/drivers/nvme/host/nvme.ko.xz\n",
      kRelease);
  EXPECT_EQ(l.modules, std::set<std::string>{"nvme"});
}

TEST(InitramfsListing, CountsNoEntriesInAnEmptyListing) {
  EXPECT_EQ(parseInitramfsListing("", kRelease).entries, 0U);
  EXPECT_EQ(parseInitramfsListing("\n  \n", kRelease).entries, 0U);
  EXPECT_TRUE(parseInitramfsListing("usr/lib/modules/x/a.ko\n", "").modules.empty());
}

TEST(InitramfsListing, RebuildsWithTheGeneratorsOwnCommand) {
  EXPECT_EQ(initramfsRebuildCommand(Initramfs::Generator::UpdateInitramfs, kRelease),
            "update-initramfs -u -k 6.1.0-18-amd64");
  EXPECT_EQ(initramfsRebuildCommand(Initramfs::Generator::Dracut, kRelease), "dracut -f --kver 6.1.0-18-amd64");
}

}  // namespace initramfs_test
