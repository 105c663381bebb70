// The fake kernel judged by Linux: the writes tests/vm's replay scenario made on Debian's 6.1 and
// 6.12 (group types, a driver that does not match, bad module-parameter values, groups of one and
// of three devices), with the errno and the state after each, are replayed on a FakeHost of that
// guest; every errno and every state must be equal. The recorded runs are tests/vm/replay/
// replay-<series>.json; the vm scenario runs this test on its fresh result (IOMMUD_REPLAY).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/fake_host.hpp"
#include "support/fake_kernel.hpp"

namespace fake_kernel_replay_test {

using namespace iommud;
using namespace iommud::testing;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSolo = "0000:01:00.0";
constexpr const char* kBridge = "0000:02:00.0";
constexpr const char* kPairA = "0000:03:01.0";
constexpr const char* kPairB = "0000:03:02.0";
constexpr const char* kNic = "0000:04:00.0";
constexpr const char* kParams = "/sys/module/nvme/parameters/";
constexpr int kSoloGroup = 8;
constexpr int kPairGroup = 9;

// The q35 guest of tests/vm (vmlib.DEVICES): an NVMe alone in its group, a conventional PCI bridge
// with two NVMe behind it in one group, the e1000e; every group at the state the run began with.
std::unique_ptr<FakeHost> guest(const json& initial) {
  auto h = std::make_unique<FakeHost>();
  h->bridge("0000:00:02.0");
  h->bridge("0000:00:03.0");
  h->bridge("0000:00:04.0");
  h->pci({.address = kSolo, .parent = "0000:00:02.0", .classCode = 0x010802, .driver = "nvme"});
  h->pci({.address = kBridge, .parent = "0000:00:03.0", .classCode = 0x060400});  // shpchp's probe fails
  h->pci({.address = kPairA, .parent = kBridge, .classCode = 0x010802, .driver = "nvme"});
  h->pci({.address = kPairB, .parent = kBridge, .classCode = 0x010802, .driver = "nvme"});
  h->pci({.address = kNic, .parent = "0000:00:04.0", .classCode = 0x020000, .driver = "e1000e"});
  h->group(kSoloGroup, initial["types"]["solo"].get<std::string>() + "\n", {kSolo});
  h->group(kPairGroup, initial["types"]["pair"].get<std::string>() + "\n", {kBridge, kPairA, kPairB});
  h->group(10, "DMA\n", {kNic});
  for (const auto& [name, value] : initial["params"].items()) {
    h->write(std::string(kParams) + name, value.get<std::string>() + "\n");
  }
  return h;
}

std::string readTrimmed(const fs::path& p) {
  std::ifstream in(p);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

json stateOf(const FakeHost& h) {
  json s;
  s["types"]["solo"] = readTrimmed(h.root() / ("sys/kernel/iommu_groups/" + std::to_string(kSoloGroup) + "/type"));
  s["types"]["pair"] = readTrimmed(h.root() / ("sys/kernel/iommu_groups/" + std::to_string(kPairGroup) + "/type"));
  for (const char* a : {kSolo, kPairA, kPairB}) {
    std::error_code ec;
    auto link = fs::read_symlink(h.root() / "sys/bus/pci/devices" / a / "driver", ec);
    s["drivers"][a] = ec ? json(nullptr) : json(link.filename().string());
  }
  for (const char* p : {"io_queue_depth", "sgl_threshold"}) {
    s["params"][p] = readTrimmed(h.root() / (std::string(kParams + 1) + p));
  }
  return s;
}

void replay(const fs::path& file) {
  SCOPED_TRACE(file.string());
  std::ifstream in(file);
  ASSERT_TRUE(in) << "missing " << file << " (tests/vm/run replay --record)";
  const json run = json::parse(in);
  const std::string release = run["release"];
  const core::KernelVersion version{std::stoi(release), std::stoi(release.substr(release.find('.') + 1)), 0};
  auto h = guest(run["initial"]);
  FakeKernel kernel(h->root(), version);
  // nvme's io_queue_depth has a setter of its own: kstrtouint(val, 10), at least 2.
  kernel.declareParam(std::string(kParams) + "io_queue_depth",
                      {FakeKernel::ParamType::Uint, std::pair{2LL, 0xffffffffLL}});
  int n = 0;
  for (const auto& step : run["steps"]) {
    std::string path = step["path"];
    const std::string value = step["value"];
    if (path.starts_with("group:")) {
      int g = path.substr(6) == kSolo ? kSoloGroup : kPairGroup;
      path = "/sys/kernel/iommu_groups/" + std::to_string(g) + "/type";
    }
    auto r = kernel.write(path, value);
    const std::string got = r ? std::string("ok") : std::string(strerrorname_np(r.error().code));
    const std::string want = step["errno"].is_null() ? std::string("ok") : step["errno"].get<std::string>();
    EXPECT_EQ(got, want) << "step " << n << ": " << step["path"] << " <- " << value << " on " << release;
    EXPECT_EQ(stateOf(*h), step["state"]) << "step " << n << ": " << step["path"] << " <- " << value;
    ++n;
  }
  EXPECT_GT(n, 20);
}

TEST(FakeKernelReplay, AnswersAsDebians61And612Did) {
  if (const char* live = std::getenv("IOMMUD_REPLAY"); live != nullptr) {
    replay(live);  // a fresh guest's result (tests/vm: run replay)
    return;
  }
  const fs::path testdata = fs::path(IOMMUD_TEST_DATA) / ".." / "vm" / "replay";
  replay(testdata / "replay-6.1.json");
  replay(testdata / "replay-6.12.json");
}

}  // namespace fake_kernel_replay_test
