// The one atomic file writer and the change-record store (adapters/state), against the real
// filesystem of a temporary directory; short writes and EINTR are injected through the writer's
// write(2), the rest is the kernel's.
#include "adapters/state/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "adapters/state/change_records.hpp"
#include "adapters/state/lock.hpp"

namespace atomic_file_test {

using namespace iommud;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "iommud-atomic-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A write(2) that is interrupted every other call and otherwise writes at most 3 bytes.
int gCalls = 0;
ssize_t interruptedAndShort(int fd, const void* buf, size_t count) {
  if (gCalls++ % 2 == 0) {
    errno = EINTR;
    return -1;
  }
  return ::write(fd, buf, std::min<size_t>(count, 3));
}

ssize_t noSpace(int, const void*, size_t) {
  errno = ENOSPC;
  return -1;
}

ssize_t noProgress(int, const void*, size_t) {
  return 0;
}

TEST(AtomicFile, WritesEverythingThroughShortWritesAndSignals) {
  TempDir dir;
  const auto file = (dir.path / "iommud.prom").string();
  const std::string text = "iommud_devices 4096\niommud_groups 17\n";
  gCalls = 0;
  auto done = adapters::state::writeFileAtomic(file, text, 0644, interruptedAndShort);
  ASSERT_TRUE(done.ok()) << done.error().describe();
  EXPECT_EQ(slurp(file), text);
  EXPECT_GT(gCalls, 2 * static_cast<int>(text.size() / 3));         // it really was cut short and interrupted
  EXPECT_EQ(dir.names(), std::vector<std::string>{"iommud.prom"});  // no temporary left
}

TEST(AtomicFile, AFailedWriteKeepsTheOldFileAndLeavesNoTemporary) {
  TempDir dir;
  const auto file = (dir.path / "changes.json").string();
  ASSERT_TRUE(adapters::state::writeFileAtomic(file, "old\n").ok());
  for (auto call : {noSpace, noProgress}) {
    auto done = adapters::state::writeFileAtomic(file, "new\n", 0600, call);
    ASSERT_FALSE(done.ok());
    EXPECT_EQ(done.error().code, call == noSpace ? ENOSPC : EIO);
    EXPECT_EQ(slurp(file), "old\n");
    EXPECT_EQ(dir.names(), std::vector<std::string>{"changes.json"});
  }
}

TEST(AtomicFile, GivesTheFileExactlyTheModeAskedWhateverTheUmask) {
  TempDir dir;
  const auto file = (dir.path / "nfd").string();
  const mode_t old = ::umask(077);  // the daemon's
  auto done = adapters::state::writeFileAtomic(file, "x\n", 0644);
  ::umask(old);
  ASSERT_TRUE(done.ok()) << done.error().describe();
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777U, 0644U);
}

TEST(ChangeRecords, RoundTripInADirectoryTheyCreateAndATornEntryIsReportedNotRead) {
  TempDir dir;
  adapters::sysfs::Root root(dir.path.string());
  adapters::state::ChangeRecord r;
  r.kind = core::ChangeKind::Domain;
  r.device = "0000:03:00.0";
  r.group = 20;
  r.object = "group 20";
  r.key = "type";
  r.original = "DMA-FQ";
  r.written = "identity";
  r.rule = "nvme-identity";
  r.ruleWhere = "test.toml:2:1";
  r.time = "2026-11-21T12:00:00Z";
  r.ifindex = 3;
  auto saved = adapters::state::saveRecords(root, "/run/iommud/changes.json", {r});
  ASSERT_TRUE(saved.ok()) << saved.error().describe();
  struct stat st {};
  ASSERT_EQ(::stat((dir.path / "run/iommud").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777U, 0700U);
  ASSERT_EQ(::stat((dir.path / "run/iommud/changes.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777U, 0600U);
  auto read = adapters::state::readRecordsFile(root.hostPath("/run/iommud/changes.json"));
  ASSERT_TRUE(read.ok() && *read) << "read";
  ASSERT_TRUE((*read)->whole()) << (*read)->damage.front();
  const auto& loaded = (*read)->records;
  ASSERT_EQ(loaded.size(), 1U);
  EXPECT_EQ(loaded[0].group, 20);
  EXPECT_EQ(loaded[0].written, "identity");
  EXPECT_EQ(loaded[0].ruleWhere, "test.toml:2:1");
  EXPECT_EQ(loaded[0].ifindex, 3);
  std::ofstream(dir.path / "run/iommud/changes.json") << "[{\"kind\": \"domain\"";  // cut short
  auto torn = adapters::state::readRecordsFile(root.hostPath("/run/iommud/changes.json"));
  ASSERT_TRUE(torn.ok() && *torn);
  EXPECT_TRUE((*torn)->records.empty());
  ASSERT_FALSE((*torn)->whole());
  EXPECT_EQ((*torn)->damage.front(), "entry 1 is not JSON: the file ends inside it (cut short)");
}

// A removal (a modprobe.d file iommud created, on revert) survives a crash only once its directory
// is synced, as a rename does.
TEST(AtomicFile, ARemovalSyncsItsDirectory) {
  TempDir dir;
  const auto file = (dir.path / "iommud-nvme.conf").string();
  std::ofstream(file) << "options nvme poll_queues=0\n";
  std::vector<std::string> steps;
  adapters::state::setFaultHook([&](std::string_view step, const std::string& path) {
    steps.push_back(std::string(step) + " " + path);
    return 0;
  });
  auto removed = adapters::state::removeFile(file);
  adapters::state::setFaultHook(nullptr);
  ASSERT_TRUE(removed.ok()) << removed.error().describe();
  EXPECT_EQ(steps, (std::vector<std::string>{"unlink " + file, "fsync-dir " + dir.path.string()}));
}

TEST(AtomicFile, NeverWritesIntoAFilePlantedAtATemporaryName) {
  TempDir dir;
  const auto file = (dir.path / "iommud.prom").string();
  // The name the writer once used (".NAME.tmp.PID"): whoever planted a file there could keep it open
  // and change the export after it was written.
  const auto planted = dir.path / (".iommud.prom.tmp." + std::to_string(::getpid()));
  { std::ofstream(planted) << "planted\n"; }
  auto done = adapters::state::writeFileAtomic(file, "x\n", 0644);
  ASSERT_TRUE(done.ok()) << done.error().describe();
  EXPECT_EQ(slurp(file), "x\n");
  EXPECT_EQ(slurp(planted), "planted\n");
  EXPECT_EQ(dir.names().size(), 2U);  // the file and the planted one: no temporary left
}

TEST(ReadOwnFile, ReadsAFileAndRefusesLinksFifosAndDevicesWithoutBlocking) {
  TempDir dir;
  using adapters::state::readOwnFile;
  auto absent = readOwnFile((dir.path / "absent").string(), 100);
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
  { std::ofstream(dir.path / "file") << "abc"; }
  auto file = readOwnFile((dir.path / "file").string(), 100);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  EXPECT_EQ(file->value_or(""), "abc");
  fs::create_symlink(dir.path / "file", dir.path / "link");
  fs::create_symlink("/dev/zero", dir.path / "zero");
  ASSERT_EQ(::mkfifo((dir.path / "fifo").c_str(), 0600), 0);
  for (const char* name : {"link", "zero", "fifo"}) {
    auto r = readOwnFile((dir.path / name).string(), 100);
    EXPECT_FALSE(r.ok()) << name;
  }
  auto fifo = readOwnFile((dir.path / "fifo").string(), 100);
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.error().describe(), (dir.path / "fifo").string() + ": not a regular file");
  auto big = readOwnFile((dir.path / "file").string(), 2);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, EFBIG);
}

// A directory and its missing parents, made 0700; one that is there is left as it is; a file in
// the way is an error naming it.
TEST(MakeDirectories, MakesWhatIsMissingAndLeavesWhatIsThere) {
  TempDir t;
  const fs::path deep = t.path / "run/iommud/deep";
  ASSERT_TRUE(adapters::state::makeDirectories(deep.string()));
  EXPECT_TRUE(fs::is_directory(deep));
  EXPECT_EQ(fs::status(t.path / "run").permissions(), fs::perms::owner_all);
  fs::permissions(deep, fs::perms(0750));
  ASSERT_TRUE(adapters::state::makeDirectories(deep.string()));
  EXPECT_EQ(fs::status(deep).permissions(), fs::perms(0750));
  std::ofstream(t.path / "file") << "x";
  auto blocked = adapters::state::makeDirectories((t.path / "file/below").string());
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.error().code, ENOTDIR);
  EXPECT_EQ(blocked.error().path, (t.path / "file/below").string());
}

TEST(CheckOwnDirectory, RefusesADirectoryGroupOrOthersCanWrite) {
  TempDir dir;
  EXPECT_TRUE(adapters::state::checkOwnDirectory(dir.path.string()).ok());
  fs::permissions(dir.path, fs::perms::all);
  auto open = adapters::state::checkOwnDirectory(dir.path.string());
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().describe(),
            dir.path.string() + ": writable by group or others (mode 0777): refusing to write into it");
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  EXPECT_TRUE(adapters::state::checkOwnDirectory(dir.path.string()).ok());
}

// A link another user owns, on the way to the export directory, is not followed: it could point
// the write into any directory root may write (here a 0755 one, which passes the checks of the
// directory itself). Run as root, the link is made and followed, then given to nobody; run as
// another user (the rpm's %check), the link is that user's from the start.
TEST(CheckOwnDirectory, RefusesToFollowALinkNotRootOwns) {
  TempDir dir;
  const fs::path target = dir.path / "etc";
  fs::create_directory(target);
  fs::permissions(target, fs::perms(0755));
  const fs::path link = dir.path / "exports";
  fs::create_directory_symlink(target, link);
  uid_t owner = ::geteuid();
  if (owner == 0) {
    EXPECT_TRUE(adapters::state::checkOwnDirectory(link.string()).ok());
    EXPECT_TRUE(adapters::state::checkOwnDirectory((link / ".").string()).ok());
    owner = 65534;
    ASSERT_EQ(::lchown(link.c_str(), owner, owner), 0) << std::strerror(errno);
  }
  for (const fs::path& through : {link, link / "."}) {
    auto refused = adapters::state::checkOwnDirectory(through.string());
    ASSERT_FALSE(refused.ok()) << through;
    EXPECT_EQ(refused.error().describe(), through.string() + ": " + link.string() + " is a link owned by uid " +
                                              std::to_string(owner) + ", not root: refusing to follow it");
  }
}

}  // namespace atomic_file_test
