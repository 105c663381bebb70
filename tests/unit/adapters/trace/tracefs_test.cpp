#include "adapters/trace/tracefs.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tracefs_test {

// The naming, the owner check and the sweep of adapters/trace on a synthetic root (a directory
// standing for /). What tracefs itself does with them is checked in tests/vm (measure_scenario.py).

using namespace iommud::adapters;
using namespace iommud::adapters::trace;
namespace fs = std::filesystem;

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

std::string recorded(const std::string& kernel, const std::string& file) {
  std::ifstream in(fs::path(IOMMUD_TEST_DATA) / "trace" / kernel / file);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Linux 6.18 renamed dma_map_page/dma_unmap_page to dma_map_phys/dma_unmap_phys (the formats of
// this build machine's 6.18 kernel, tests/data/trace/6.18): maps are still counted per device.
// mkdir of an instance in tracefs creates its events/ tree; on this synthetic root the tree is
// laid out beforehand (open() accepts an instance directory that exists).
TEST(TracefsCounters, ArmsTheRenamedEventsOf618) {
  TempRoot root;
  root.file("proc/self/stat", statLine(::getpid(), "unit_tests", 42));
  std::string inst = "sys/kernel/tracing/instances/" + instanceName({::getpid(), 42});
  root.file(inst + "/buffer_size_kb", "");
  for (const char* event : {"dma_map_phys", "dma_unmap_phys", "dma_map_sg", "dma_unmap_sg"}) {
    root.file(inst + "/events/dma/" + event + "/format", recorded("6.18", std::string("dma.") + event + ".format"));
    root.file(inst + "/events/dma/" + event + "/trigger", "");
  }
  root.file(inst + "/events/dma/dma_map_phys/hist", recorded("6.12", "dma.dma_map_page.hist"));
  root.file(inst + "/events/dma/dma_unmap_phys/hist", recorded("6.12", "dma.dma_unmap_page.hist"));
  root.file(inst + "/events/dma/dma_map_sg/hist", recorded("6.12", "dma.dma_map_sg.hist"));
  root.file(inst + "/events/dma/dma_unmap_sg/hist", recorded("6.12", "dma.dma_unmap_sg.hist"));
  sysfs::Root r(root.path());
  auto counters = DmaCounters::open(r);
  ASSERT_TRUE(counters) << counters.error().describe();
  // Armed under the new names; the swiotlb and iommu events this root lacks are absent.
  std::ifstream trigger(root.path() + "/" + inst + "/events/dma/dma_map_phys/trigger");
  std::string armed((std::istreambuf_iterator<char>(trigger)), {});
  EXPECT_EQ(armed, "hist:keys=device:vals=hitcount,size");
  EXPECT_EQ(counters->absent(), (std::vector<iommud::core::DmaEvent>{
                                    iommud::core::DmaEvent::Bounced, iommud::core::DmaEvent::PageFault,
                                    iommud::core::DmaEvent::IommuMap, iommud::core::DmaEvent::IommuUnmap}));
  auto reading = counters->read();
  ASSERT_TRUE(reading) << reading.error().describe();
  EXPECT_TRUE(iommud::core::attributesMaps(*reading));
  ASSERT_TRUE(reading->devices.contains("0000:01:00.0"));
  EXPECT_GE(reading->devices.at("0000:01:00.0").maps, 13963U);
}

}  // namespace tracefs_test
