#include "app/change/planning.hpp"

#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>

#include "app/change/policy_check.hpp"
#include "support/unique_fd.hpp"
#include "unit/temp_dir.hpp"

namespace planning_test {

using namespace iommud;
namespace fs = std::filesystem;

using iommud::testing::TempDir;

// Counts the opens and reads of what is in a directory, and of the directory itself, from the
// moment it is made. The kernel queues the events at the open itself, so reading them after the
// load, without waiting, sees every one.
class OpenWatch {
 public:
  explicit OpenWatch(const fs::path& dir) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    EXPECT_GE(fd_.get(), 0);
    EXPECT_GE(::inotify_add_watch(fd_.get(), dir.c_str(), IN_OPEN | IN_ACCESS), 0);
  }
  [[nodiscard]] int events() const {
    alignas(inotify_event) std::array<char, 4096> buf{};
    int count = 0;
    for (;;) {
      ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
      if (n <= 0) return count;
      for (ssize_t off = 0; off < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf.data() + off);  // NOLINT: the kernel's layout
        ++count;
        off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
  }

 private:
  support::UniqueFd fd_;
};

void writeFile(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
}

bool mentions(const config::Loaded& loaded, const std::string& what) {
  return std::any_of(loaded.diagnostics.begin(), loaded.diagnostics.end(),
                     [&](const auto& d) { return d.str().find(what) != std::string::npos; }) ||
         std::any_of(loaded.policies.rules.begin(), loaded.policies.rules.end(),
                     [&](const auto& r) { return r.name.find(what) != std::string::npos; });
}

// Support staff load the policies of a snapshot someone sent them, as root. Links planted in it,
// at a policy file (absolute and relative), at a whole layer's directory and at the directory
// above it, resolve inside the snapshot: the root-only file outside is never opened, so neither
// its rules nor its text reach the diagnostics. A mask link to /dev/null still masks.
TEST(LoadPolicies, LinksInACapturedRootAreFollowedInsideItAndNothingOutsideIsOpened) {
  TempDir outside("iommud-outside");
  TempDir snapshot("iommud-snapshot");
  const fs::path secret = outside.path() / "secret.toml";
  writeFile(
      secret,
      "[[rule]]\nname = \"outside-rule\"\ndescription = \"x\"\ndomain = \"DMA\"\nhunter2 = \"a root-only value\"\n");

  const fs::path root = snapshot.path();
  const fs::path admin = root / "etc/iommud/policies.d";
  fs::create_directories(admin);
  fs::create_symlink(secret, admin / "10-absolute.toml");
  std::string up;
  for (int i = 0; i < 40; ++i) up += "../";
  fs::create_symlink(up + secret.relative_path().string(), admin / "20-relative.toml");
  fs::create_symlink("/dev/null", admin / "30-thunderbolt-nic.toml");  // masks the shipped file
  fs::create_directories(root / "run");
  fs::create_symlink(outside.path(), root / "run/iommud");  // the runtime layer's parent, linked out

  OpenWatch watch(outside.path());
  app::PolicySources sources;
  sources.root = root.string();
  auto loaded = app::loadPolicies(sources);

  EXPECT_EQ(watch.events(), 0) << "a file outside the root was opened";
  EXPECT_FALSE(mentions(loaded, "outside-rule"));
  EXPECT_FALSE(mentions(loaded, "hunter2"));
  // The links lead nowhere inside the snapshot, and say so, naming the file in the snapshot.
  for (const char* name : {"10-absolute.toml", "20-relative.toml"}) {
    EXPECT_TRUE(mentions(loaded, (admin / name).string() + ": error: No such file or directory")) << name;
  }
  const bool masked = std::any_of(loaded.policies.files.begin(), loaded.policies.files.end(),
                                  [](const auto& f) { return f.name == "30-thunderbolt-nic.toml" && f.masked; });
  EXPECT_TRUE(masked);

  // The same layers opened as paths of this machine (what loading did before) read the file
  // outside: the watch sees it, so its silence above means something.
  config::LoadOptions byPath;
  auto followed = config::loadPolicyFiles(app::policyLayers(root.string()), {}, byPath);
  EXPECT_GT(watch.events(), 0);
  EXPECT_TRUE(mentions(followed, "hunter2"));
}

// Under a root a file named on the command line, outside the root, is read where it is: only
// what lies in the root is contained.
TEST(LoadPolicies, AFileNamedOutsideTheRootIsReadWhereItIs) {
  TempDir outside("iommud-outside");
  TempDir snapshot("iommud-snapshot");
  const fs::path file = outside.path() / "50-mine.toml";
  writeFile(file, "[[rule]]\nname = \"mine\"\ndescription = \"x\"\ndomain = \"DMA\"\n");
  app::PolicySources sources;
  sources.root = snapshot.path().string();
  sources.files = {file.string()};
  auto loaded = app::loadPolicies(sources);
  EXPECT_TRUE(loaded.ok()) << (loaded.diagnostics.empty() ? "" : loaded.diagnostics.front().str());
  EXPECT_TRUE(mentions(loaded, "mine"));
}

}  // namespace planning_test
