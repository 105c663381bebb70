#include "adapters/sysfs/contained_read.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "adapters/sysfs/host_reader.hpp"
#include "adapters/sysfs/root.hpp"
#include "app/report/snapshot.hpp"
#include "config/daemon_config.hpp"
#include "support/scenarios.hpp"
#include "support/timeout_scale.hpp"

namespace contained_read_test {

using namespace iommud;
using adapters::sysfs::openInRoot;
using adapters::sysfs::Resolver;
using adapters::sysfs::Root;
using support::UniqueFd;
namespace fs = std::filesystem;

// A host root and, beside it, a directory outside it holding what must never be read.
class HostileTree {
 public:
  HostileTree() {
    std::string templ = (fs::temp_directory_path() / "iommud-contained-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    base_ = templ;
    fs::create_directories(root() / "etc");
    fs::create_directories(root() / "proc/sys/kernel");
    fs::create_directories(outside());
    std::ofstream(root() / "etc/hostname") << "inside\n";
    std::ofstream(outside() / "secret") << "OUTSIDE-SECRET\n";
  }
  ~HostileTree() { fs::remove_all(base_); }
  HostileTree(const HostileTree&) = delete;
  HostileTree& operator=(const HostileTree&) = delete;

  [[nodiscard]] fs::path root() const { return base_ / "root"; }
  [[nodiscard]] fs::path outside() const { return base_ / "outside"; }
  // The outside file as seen from /, and by a relative path with more ".." than the root is deep.
  [[nodiscard]] std::string outsideAbsolute() const { return (outside() / "secret").string(); }
  [[nodiscard]] static std::string outsideRelative() { return "../../../../../../../../../../../outside/secret"; }

  void link(const std::string& target, const std::string& at) const {
    fs::create_directories((root() / at.substr(1)).parent_path());
    fs::create_symlink(target, root() / at.substr(1));
  }

 private:
  fs::path base_;
};

// Runs `read` in a child under an alarm and an address-space limit (no limit under ASan), so that a read that hangs (a
// FIFO) or never ends (/dev/zero) fails the test instead of hanging or exhausting the machine.
// The deadline only bounds how long a failing test takes.
::testing::AssertionResult endsAndHolds(const std::function<bool()>& read) {
  pid_t pid = ::fork();
  if (pid < 0) return ::testing::AssertionFailure() << "fork failed";
  if (pid == 0) {
#if !defined(__SANITIZE_ADDRESS__)
    // Not under AddressSanitizer, whose shadow memory is terabytes of address space that no
    // limit of 1 GiB admits ("Failed to mmap"); there the alarm alone bounds a read that never ends.
    const rlimit memory{size_t{1} << 30U, size_t{1} << 30U};
    ::setrlimit(RLIMIT_AS, &memory);
#endif
    ::alarm(static_cast<unsigned>(
        std::chrono::ceil<std::chrono::seconds>(iommud::testing::scaled(std::chrono::seconds(20))).count()));
    bool held = false;
    try {
      held = read();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(held ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ::testing::AssertionSuccess();
  if (WIFSIGNALED(status)) return ::testing::AssertionFailure() << "the read was ended by signal " << WTERMSIG(status);
  return ::testing::AssertionFailure() << "the read exited " << WEXITSTATUS(status)
                                       << (WEXITSTATUS(status) == 3 ? " (an exception)" : " (a wrong result)");
}

bool refused(const core::Result<std::string>& r, int code, const std::string& says) {
  return !r && r.error().code == code && r.error().message.find(says) != std::string::npos;
}

TEST(ContainedRead, AnAbsoluteLinkIsFollowedInsideTheRoot) {
  HostileTree t;
  t.link("/etc/hostname", "/proc/cmdline");
  EXPECT_EQ(Root(t.root().string()).readFile("/proc/cmdline").valueOr(std::string("failed")), "inside\n");
}

TEST(ContainedRead, ALinkToAFileOutsideTheRootIsNotFollowedOut) {
  HostileTree t;
  t.link(t.outsideAbsolute(), "/proc/cmdline");
  t.link(HostileTree::outsideRelative(), "/proc/version");
  Root root(t.root().string());
  for (const char* path : {"/proc/cmdline", "/proc/version"}) {
    auto r = root.readFile(path);
    ASSERT_FALSE(r) << path << " read " << *r;
    EXPECT_EQ(r.error().code, ENOENT) << path;
    EXPECT_EQ(r.error().path, t.root().string() + path);
  }
}

TEST(ContainedRead, DotDotStopsAtTheRoot) {
  HostileTree t;
  Root root(t.root().string());
  EXPECT_EQ(root.readFile("/../../../../../../../../../etc/hostname").valueOr(std::string()), "inside\n");
  auto r = root.readFile("/proc/../../outside/secret");
  ASSERT_FALSE(r) << "read " << *r;
  EXPECT_EQ(r.error().code, ENOENT);
}

TEST(ContainedRead, ADirectoryLinkOutsideTheRootIsNotFollowedOut) {
  HostileTree t;
  fs::create_directories(t.outside() / "class/net");
  fs::create_symlink("/etc/passwd", t.outside() / "class/net/eth0");
  t.link(t.outside().string(), "/sys");
  Root root(t.root().string());
  EXPECT_FALSE(root.readLink("/sys/class/net/eth0"));
  EXPECT_FALSE(root.listDir("/sys/class/net"));
  EXPECT_FALSE(root.fileMode("/sys/class/net/eth0"));
}

TEST(ContainedRead, AFifoIsRefusedWithoutHanging) {
  HostileTree t;
  ASSERT_EQ(::mkfifo((t.root() / "proc/cmdline").c_str(), 0644), 0);
  const std::string root = t.root().string();
  EXPECT_TRUE(endsAndHolds([&] { return refused(Root(root).readFile("/proc/cmdline"), EPERM, "a FIFO"); }));
  EXPECT_TRUE(endsAndHolds([&] { return refused(Root("/").readFile(root + "/proc/cmdline"), EPERM, "a FIFO"); }));
}

TEST(ContainedRead, ALinkToADeviceIsRefusedUnderTheLiveRootAndMissingUnderAnother) {
  HostileTree t;
  t.link("/dev/zero", "/proc/cmdline");
  const std::string root = t.root().string();
  // The live root follows the link to the device, and refuses to read it.
  EXPECT_TRUE(
      endsAndHolds([&] { return refused(Root("/").readFile(root + "/proc/cmdline"), EPERM, "a character device"); }));
  // Another root has no /dev/zero of its own.
  EXPECT_TRUE(endsAndHolds([&] {
    auto r = Root(root).readFile("/proc/cmdline");
    return !r && r.error().code == ENOENT;
  }));
}

// A directory held open (Root::held, Root::within) reads its files by name, and contains them as
// the path from the root does: a link beside it resolves inside the root, a link out of the root
// reads nothing, and the recorder sees the host path.
TEST(ContainedRead, AHeldDirectoryContainsWhatItReadsAsTheRootDoes) {
  HostileTree t;
  t.link("/etc/hostname", "/proc/cmdline");
  t.link(t.outsideAbsolute(), "/proc/version");
  std::ofstream(t.root() / "proc/plain") << "plain\n";
  fs::permissions(t.root() / "proc/plain", fs::perms(0640));
  fs::permissions(t.root() / "etc/hostname", fs::perms(0604));
  adapters::sysfs::Recorder recorder;
  const Root root(t.root().string(), &recorder);
  for (const Root& r : {root.held(), root.within("/proc"), root.held().within("/proc")}) {
    EXPECT_EQ(r.readFile("/proc/plain").valueOr(std::string("failed")), "plain\n");
    EXPECT_EQ(r.readFile("/proc/cmdline").valueOr(std::string("failed")), "inside\n");
    auto out = r.readFile("/proc/version");
    ASSERT_FALSE(out) << "read " << *out;
    EXPECT_EQ(out.error().code, ENOENT);
    EXPECT_EQ(out.error().path, t.root().string() + "/proc/version");
    auto missing = r.readFile("/proc/missing");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ENOENT);
    EXPECT_EQ(missing.error().path, t.root().string() + "/proc/missing");
    EXPECT_EQ(r.readLink("/proc/cmdline").valueOr(std::string("failed")), "/etc/hostname");
    // The mode of a file beside it, by name; of a link, its target's inside the root; none out of it.
    EXPECT_EQ(r.fileMode("/proc/plain").valueOr(0U), 0640U);
    EXPECT_EQ(r.fileMode("/proc/cmdline").valueOr(0U), 0604U);  // /etc/hostname's
    EXPECT_FALSE(r.fileMode("/proc/version"));
    EXPECT_FALSE(r.fileMode("/proc/missing"));
  }
  ASSERT_FALSE(recorder.captures().empty());
  EXPECT_EQ(recorder.captures().front().path, "/proc/plain");
}

// Apart from the test above: it forks, which qemu-user cannot (scripts/build-arm64 leaves out
// ContainedRead.AFifo*).
TEST(ContainedRead, AFifoBesideAHeldDirectoryIsRefusedWithoutHanging) {
  HostileTree t;
  ASSERT_EQ(::mkfifo((t.root() / "proc/fifo").c_str(), 0644), 0);
  const Root root(t.root().string());
  for (const Root& r : {root.held(), root.within("/proc")}) {
    EXPECT_TRUE(endsAndHolds([&] { return refused(r.readFile("/proc/fifo"), EPERM, "a FIFO"); }));
  }
}

TEST(ContainedRead, AFileOverTheCapIsRefusedNamingIt) {
  HostileTree t;
  fs::path big = t.root() / "proc/self/mountinfo";
  fs::create_directories(big.parent_path());
  std::ofstream(big).close();
  fs::resize_file(big, adapters::sysfs::kReadLimit + 1);  // sparse: no disk used
  Root root(t.root().string());
  auto r = root.readFile("/proc/self/mountinfo");
  ASSERT_FALSE(r) << "read " << r->size() << " bytes";
  EXPECT_EQ(r.error().code, EFBIG);
  EXPECT_EQ(r.error().describe(), big.string() + ": more than 16777216 bytes: refused");
  fs::resize_file(big, adapters::sysfs::kReadLimit);
  EXPECT_EQ(root.readFile("/proc/self/mountinfo").valueOr(std::string()).size(), adapters::sysfs::kReadLimit);
  EXPECT_TRUE(refused(root.readFile("/etc/hostname", 6), EFBIG, "more than 6 bytes"));
}

TEST(ContainedRead, AnUnsafeFileIsReportedAsUnreadable) {
  auto h = iommud::testing::intelBareMetal();
  fs::remove(h->root() / "proc/cmdline");
  ASSERT_EQ(::mkfifo((h->root() / "proc/cmdline").c_str(), 0644), 0);
  const std::string root = h->rootString();
  EXPECT_TRUE(endsAndHolds([&] {
    auto host = adapters::sysfs::readHost(Root(root));
    if (!host) return false;
    for (const auto& u : host->unreadable) {
      if (u.path == root + "/proc/cmdline" && u.reason.find("a FIFO") != std::string::npos) return true;
    }
    return false;
  }));
}

TEST(ContainedRead, ASnapshotHoldsNoByteFromOutsideTheRootAndIsPrivate) {
  auto h = iommud::testing::intelBareMetal();
  HostileTree t;
  fs::remove(h->root() / "proc/cmdline");
  fs::remove(h->root() / "proc/version");
  fs::create_symlink(t.outsideAbsolute(), h->root() / "proc/cmdline");
  fs::create_symlink("../../../../../../../../../../../../../../.." + t.outsideAbsolute(), h->root() / "proc/version");
  const fs::path tar = t.outside() / "snap.tar";
  const mode_t umask = ::umask(022);
  auto summary = app::takeSnapshot(h->rootString(), tar.string(), false, 0);
  ::umask(umask);
  ASSERT_TRUE(summary) << summary.error().describe();
  std::ifstream in(tar, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("sys/kernel/iommu_groups"), std::string::npos);
  EXPECT_EQ(bytes.find("OUTSIDE-SECRET"), std::string::npos);
  EXPECT_EQ(fs::status(tar).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

// The walk (kernels before 5.6) must resolve as openat2's RESOLVE_IN_ROOT does.
class OpenInRoot : public ::testing::TestWithParam<Resolver> {
 protected:
  [[nodiscard]] core::Result<std::string> read(const HostileTree& t, const std::string& path) const {
    UniqueFd root(::open(t.root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    auto fd = openInRoot(root.get(), path, adapters::sysfs::kReadFlags, GetParam());
    if (!fd) return fd.error();
    return adapters::sysfs::readRegularFile(fd->get(), path, 1024);
  }
};

TEST_P(OpenInRoot, ResolvesLinksAndDotDotInsideTheRoot) {
  HostileTree t;
  t.link("/etc/hostname", "/proc/absolute");
  t.link("../etc/./hostname", "/proc/relative");
  t.link("../../../../etc", "/proc/sys/etc");
  t.link("/proc/relative", "/proc/chained");
  t.link(t.outsideAbsolute(), "/proc/out");
  t.link(HostileTree::outsideRelative(), "/proc/up");
  t.link("/proc/loop", "/proc/loop");
  for (const char* path : {"/proc/absolute", "/proc/relative", "proc/sys/etc/hostname", "/proc/chained",
                           "/../../etc/hostname", "/proc/sys/../../../etc/hostname"}) {
    EXPECT_EQ(read(t, path).valueOr(std::string()), "inside\n") << path;
  }
  for (const char* path : {"/proc/out", "/proc/up", "/../outside/secret"}) {
    auto r = read(t, path);
    EXPECT_TRUE(!r && r.error().code == ENOENT) << path;
  }
  auto loop = read(t, "/proc/loop");
  EXPECT_TRUE(!loop && loop.error().code == ELOOP);
  UniqueFd root(::open(t.root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  EXPECT_TRUE(openInRoot(root.get(), "/", O_RDONLY | O_DIRECTORY, GetParam()));
  auto notDir = openInRoot(root.get(), "/etc/hostname/x", O_RDONLY, GetParam());
  EXPECT_TRUE(!notDir && notDir.error().code == ENOTDIR);
}

INSTANTIATE_TEST_SUITE_P(Resolvers, OpenInRoot, ::testing::Values(Resolver::Kernel, Resolver::Walk));

TEST(ContainedRead, AFifoInPlaceOfTheConfigurationIsRefusedWithoutHanging) {
  HostileTree t;
  const fs::path conf = t.root() / "etc/iommud.conf";
  ASSERT_EQ(::mkfifo(conf.c_str(), 0644), 0);
  EXPECT_TRUE(endsAndHolds([&] {
    auto loaded = config::loadDaemonConfig(conf.string());
    return !loaded.ok() && !loaded.diagnostics.empty() &&
           loaded.diagnostics.front().message.find("not a regular file") != std::string::npos;
  }));
}

// The real kernel's sysfs: a binary attribute longer than a page arrives a page per read (an ACPI
// DMAR or IVRS table of some KB on a big server, docs/kernel.md §13), and the live root reads it
// whole, as long as the size it declares. /sys/kernel/btf/vmlinux is one on every Debian kernel
// (CONFIG_DEBUG_INFO_BTF), several MB.
TEST(ContainedRead, TheLiveRootReadsASysfsBinaryAttributeLongerThanAPageWhole) {
  const char* path = "/sys/kernel/btf/vmlinux";
  struct stat st {};
  ASSERT_EQ(::stat(path, &st), 0) << path << " is needed: a kernel built with CONFIG_DEBUG_INFO_BTF, /sys mounted";
  ASSERT_GT(st.st_size, 4 * ::sysconf(_SC_PAGESIZE));
  // The live root as it is and held (one read of the host: /sys held open, each path under it
  // opened from there).
  for (const Root& root : {Root("/"), Root("/").held()}) {
    auto got = root.readFile(path);
    ASSERT_TRUE(got) << got.error().describe();
    EXPECT_EQ(got->size(), static_cast<size_t>(st.st_size));
  }
}

// The live root held reads, lists and follows under /sys what the unheld one does, and says the
// same of a path that is not there.
TEST(ContainedRead, TheLiveRootHeldReadsSysAsUnheld) {
  const Root live("/");
  const Root held = live.held();
  const std::vector<std::string> none;
  EXPECT_EQ(held.listDir("/sys/kernel").valueOr(none), live.listDir("/sys/kernel").valueOr(none));
  EXPECT_FALSE(held.listDir("/sys/kernel").valueOr(none).empty());
  EXPECT_EQ(held.readFile("/sys/kernel/btf/vmlinux", 64).error().code, EFBIG);
  EXPECT_EQ(held.readLink("/sys/class/mem/null").valueOr(std::string("held")),
            live.readLink("/sys/class/mem/null").valueOr(std::string("live")));
  auto missing = held.readFile("/sys/kernel/no-such-attribute");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_EQ(missing.error().path, "/sys/kernel/no-such-attribute");
  EXPECT_EQ(held.readFile("/proc/sys/kernel/osrelease").valueOr(std::string("held")),
            live.readFile("/proc/sys/kernel/osrelease").valueOr(std::string("live")));
}

}  // namespace contained_read_test
