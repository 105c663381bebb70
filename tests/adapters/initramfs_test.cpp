// The initramfs adapter against the real listers: images are built here with cpio, zstd and gzip
// as Debian lays them out (an uncompressed early microcode archive, then the compressed main one)
// and listed by Debian's lsinitramfs. Without lsinitramfs (initramfs-tools-core) the tests that
// need it FAIL with the reason: scripts/setup installs it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "adapters/initramfs/initramfs_reader.hpp"
#include "adapters/sysfs/root.hpp"
#include "support/timeout_scale.hpp"

namespace fs = std::filesystem;
using iommud::adapters::initramfs::listImage;
using iommud::adapters::initramfs::ListOptions;
using iommud::adapters::initramfs::readInitramfs;
using iommud::adapters::sysfs::Root;
using State = iommud::core::Initramfs::State;
using Generator = iommud::core::Initramfs::Generator;

namespace {

constexpr const char* kRelease = "6.1.0-99-test";

// Why the tools these tests need are missing, or "".
std::string missingTools() {
  for (const char* tool : {"lsinitramfs", "cpio", "zstd", "gzip"}) {
    if (std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) != 0) {
      return std::string(tool) + " is not installed; the initramfs adapter tests run it (scripts/setup --tests)";
    }
  }
  return "";
}

void writeFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << content;
}

class InitramfsReader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("iommud-initramfs-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root/boot");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Builds an image at `image` (a host path below the root): an early archive holding only
  // microcode, then the main archive piped through `compress`, with the given module files.
  void buildImage(const std::string& image, const std::string& compress, const std::vector<std::string>& files) {
    writeFile(dir_ / "early/kernel/x86/microcode/GenuineIntel.bin", "microcode");
    for (const auto& f : files) writeFile(dir_ / "main" / f, "module");
    writeFile(dir_ / "main/init", "#!/bin/sh\n");
    const fs::path out = dir_ / "root" / image.substr(1);
    const std::string cmd = "set -e; cd '" + dir_.string() + "/early' && find . | LC_ALL=C sort | " +
                            "cpio -o -H newc --quiet > '" + out.string() + "'; cd '" + dir_.string() +
                            "/main' && find . | LC_ALL=C sort | cpio -o -H newc --quiet | " + compress + " >> '" +
                            out.string() + "'";
    ASSERT_EQ(std::system(("sh -c \"" + cmd + "\"").c_str()), 0) << cmd;
  }

  [[nodiscard]] Root root() const { return Root((dir_ / "root").string()); }

  fs::path dir_;
};

const std::string kModules = std::string("usr/lib/modules/") + kRelease;

}  // namespace

TEST_F(InitramfsReader, ListsTheModulesOfAZstdImageBehindAnEarlyMicrocodeArchive) {
  ASSERT_EQ(missingTools(), "");
  buildImage(std::string("/boot/initrd.img-") + kRelease, "zstd -q -c",
             {kModules + "/kernel/drivers/nvme/host/nvme.ko", kModules + "/kernel/drivers/nvme/host/nvme-core.ko.xz",
              kModules + "/kernel/drivers/net/ethernet/intel/e1000e/e1000e.ko.zst", kModules + "/modules.dep",
              "usr/lib/modules/6.1.0-98-test/kernel/drivers/net/ethernet/aquantia/atlantic.ko"});
  auto i = readInitramfs(root(), kRelease);
  ASSERT_EQ(i.state, State::Listed) << i.reason;
  EXPECT_EQ(i.image, std::string("/boot/initrd.img-") + kRelease);
  EXPECT_EQ(i.generator, Generator::UpdateInitramfs);
  EXPECT_EQ(i.modules, (std::set<std::string>{"e1000e", "nvme", "nvme_core"}));
}

// Under --root the image is opened inside the root and the lister reads that file: a link in the
// tree to an absolute path names the tree's file there, never the host's (here a FIFO, which a
// lister would block on).
TEST_F(InitramfsReader, AnImageLinkedOutOfTheRootIsReadInsideIt) {
  ASSERT_EQ(missingTools(), "");
  const fs::path target = dir_ / "outside/initrd.img";  // an absolute path, on the host and in the tree
  fs::create_directories(target.parent_path());
  ASSERT_EQ(::mkfifo(target.c_str(), 0600), 0);
  fs::create_directories(dir_ / "root" / target.parent_path().relative_path());
  buildImage(target.string(), "zstd -q -c", {kModules + "/kernel/drivers/nvme/host/nvme.ko"});
  fs::create_symlink(target, dir_ / "root/boot" / (std::string("initrd.img-") + kRelease));
  auto i = readInitramfs(root(), kRelease);
  ASSERT_EQ(i.state, State::Listed) << i.reason;
  EXPECT_EQ(i.modules, std::set<std::string>{"nvme"});
}

TEST_F(InitramfsReader, ListsAGzipImageByFedorasName) {
  ASSERT_EQ(missingTools(), "");
  buildImage(std::string("/boot/initramfs-") + kRelease + ".img", "gzip -c",
             {"lib/modules/" + std::string(kRelease) + "/kernel/drivers/nvme/host/nvme.ko"});
  auto i = readInitramfs(root(), kRelease);
  ASSERT_EQ(i.state, State::Listed) << i.reason;
  EXPECT_EQ(i.generator, Generator::Dracut);
  EXPECT_EQ(i.modules, std::set<std::string>{"nvme"});
}

TEST_F(InitramfsReader, SaysWhyAnImageCannotBeListed) {
  ASSERT_EQ(missingTools(), "");
  writeFile(dir_ / "root/boot" / (std::string("initrd.img-") + kRelease), "not a cpio archive\n");
  auto i = readInitramfs(root(), kRelease);
  ASSERT_EQ(i.state, State::Unreadable);
  EXPECT_EQ(i.reason.rfind("lsinitramfs exited with status ", 0), 0U) << i.reason;
}

TEST_F(InitramfsReader, FindsNoImageWhereThereIsNone) {
  EXPECT_EQ(readInitramfs(root(), kRelease).state, State::Absent);
}

TEST_F(InitramfsReader, NamesTheListerThatIsNotInstalled) {
  writeFile(dir_ / "image", "x");
  ListOptions o;
  o.listers = {"iommud-no-such-lister", "iommud-no-such-lister-either"};
  auto listed = listImage((dir_ / "image").string(), o);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code, ENOENT);
  EXPECT_EQ(listed.error().message,
            "cannot list it: iommud-no-such-lister or iommud-no-such-lister-either is not installed");
}

TEST_F(InitramfsReader, KillsAListerThatTakesTooLongWithWhatItStarted) {
  // A lister whose child keeps the output open: only killing the process group ends it.
  const fs::path lister = dir_ / "slow-lister";
  // The child never ends by itself: a reader that waited for it instead of killing it would hang
  // (ctest's timeout), so no clock needs to judge how long listImage took.
  writeFile(lister, "#!/bin/sh\nsleep infinity &\necho $! > \"$1.child\"\nwait\n");
  fs::permissions(lister, fs::perms::owner_all);
  writeFile(dir_ / "image", "x");
  ListOptions o;
  o.listers = {lister.string()};
  o.timeout = std::chrono::milliseconds(300);
  auto listed = listImage((dir_ / "image").string(), o);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code, ETIMEDOUT);
  EXPECT_EQ(listed.error().message, lister.string() + " did not finish within 300 ms");
  std::ifstream childFile(dir_ / "image.child");
  pid_t child = 0;
  ASSERT_TRUE(childFile >> child);
  // Killed, and reaped by init shortly after (or a zombie until then): never running.
  const auto deadline = std::chrono::steady_clock::now() + iommud::testing::scaled(std::chrono::seconds(10));
  while (std::chrono::steady_clock::now() < deadline && ::kill(child, 0) == 0) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid, comm, state;
    if (stat >> pid >> comm >> state && state == "Z") break;
    ::usleep(20000);
  }
  std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
  std::string pid, comm, state;
  if (stat >> pid >> comm >> state) {
    EXPECT_EQ(state, "Z") << "the lister's child still runs";
  }
}
