#include "adapters/trace/tracefs.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

// The naming, the owner check and the sweep of adapters/trace on a synthetic root (a directory
// standing for /). What tracefs itself does with them is checked in tests/vm (measure_scenario.py).

using namespace iommud::adapters;
using namespace iommud::adapters::trace;
namespace fs = std::filesystem;

namespace {

class TempRoot {
 public:
  TempRoot() {
    std::string tmpl = (fs::temp_directory_path() / "iommud-tracefs-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    fs::create_directories(dir_ / "sys/kernel/tracing/instances");
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;
  ~TempRoot() { fs::remove_all(dir_); }
  [[nodiscard]] std::string path() const { return dir_.string(); }
  void file(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  void dir(const std::string& rel) const { fs::create_directories(dir_ / rel); }
  [[nodiscard]] bool has(const std::string& rel) const { return fs::exists(dir_ / rel); }

 private:
  fs::path dir_;
};

std::string statLine(int pid, const std::string& comm, uint64_t start) {
  // proc(5): pid (comm) state, then fields 4..21, starttime is field 22.
  std::string s = std::to_string(pid) + " (" + comm + ") S";
  for (int f = 4; f <= 21; ++f) s += " " + std::to_string(f);
  return s + " " + std::to_string(start) + " 23 24\n";
}

}  // namespace

TEST(TracefsInstance, NamesCarryPidAndStartTimeAndParseBack) {
  EXPECT_EQ(instanceName({1234, 567890}), "iommud-1234-567890");
  EXPECT_EQ(parseInstanceName("iommud-1234-567890"), (InstanceOwner{1234, 567890}));
  for (const char* other :
       {"iommud-1234", "iommud--5", "iommud-0-5", "iommud-12x-5", "trace-cmd-1-2", "iommud-1-2-3"}) {
    EXPECT_FALSE(parseInstanceName(other)) << other;
  }
}

TEST(TracefsInstance, StartTimeSurvivesAParenthesisedComm) {
  EXPECT_EQ(parseStartTime(statLine(42, "a) b (c", 987654)), std::optional<uint64_t>(987654));
  EXPECT_FALSE(parseStartTime("42 (short) S 1 2"));
  EXPECT_FALSE(parseStartTime("no parenthesis"));
}

TEST(TracefsInstance, TheSweepRemovesInstancesOfDeadOrRecycledOwnersOnly) {
  TempRoot root;
  root.file("proc/100/stat", statLine(100, "iommuctl", 5000));  // alive, the same process
  root.file("proc/200/stat", statLine(200, "bash", 9999));      // pid 200 recycled by another process
  root.dir("sys/kernel/tracing/instances/iommud-100-5000");
  root.dir("sys/kernel/tracing/instances/iommud-200-7000");
  root.dir("sys/kernel/tracing/instances/iommud-300-1");  // no such process
  root.dir("sys/kernel/tracing/instances/someone-else");
  sysfs::Root r(root.path());
  auto tracefs = findTracefs(r);
  ASSERT_TRUE(tracefs) << tracefs.error().describe();
  Sweep sweep = removeStaleInstances(r, *tracefs);
  EXPECT_EQ(sweep.removed, (std::vector<std::string>{"iommud-200-7000", "iommud-300-1"}));
  EXPECT_TRUE(sweep.failures.empty());
  EXPECT_TRUE(root.has("sys/kernel/tracing/instances/iommud-100-5000"));
  EXPECT_FALSE(root.has("sys/kernel/tracing/instances/iommud-200-7000"));
  EXPECT_FALSE(root.has("sys/kernel/tracing/instances/iommud-300-1"));
  EXPECT_TRUE(root.has("sys/kernel/tracing/instances/someone-else"));
}

TEST(TracefsInstance, NotMountedSaysHowToMountIt) {
  TempRoot root;
  fs::remove_all(root.path() + "/sys/kernel/tracing/instances");
  auto t = findTracefs(sysfs::Root(root.path()));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ENOENT);
  EXPECT_NE(t.error().message.find("mount -t tracefs"), std::string::npos);
}
