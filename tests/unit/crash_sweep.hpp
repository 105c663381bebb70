#pragma once
// What the crash sweeps share (tests/README.md, "unit_tests"): the kill points and the fault hook
// on iommud's own files, the writer that dies or fails at a point, the host's settings a kill may
// leave changed, and whether each has a record.

#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/state/atomic_file.hpp"
#include "adapters/sysfs/writer.hpp"
#include "app/host/change_record.hpp"

namespace iommud::testing::crash_sweep {

struct Killed {};

class KillPoints {
 public:
  int seen = 0;
  int killAt = 0;     // 0: never
  int writes = 0;     // the host's writes (sysfs, ethtool) so far
  int failAt = 0;     // the write that fails with EIO instead; 0: none
  int own = 0;        // the steps on iommud's own files so far (adapters::state::faultAt)
  int ownFailAt = 0;  // the step that fails with ownErrno instead; 0: none
  int ownErrno = 0;
  bool lasting = false;  // every own step from ownFailAt on fails, until the process ends (a disk gone read-only)
  void point() {
    if (++seen == killAt) throw Killed{};
  }
  bool fails() { return ++writes == failAt; }
  // A step on iommud's own files (records, journal, modprobe.d): a kill point, or the failure.
  int ownStep() {
    point();
    ++own;
    return own == ownFailAt || (lasting && ownFailAt != 0 && own > ownFailAt) ? ownErrno : 0;
  }
};

// The state adapters' fault hook on `points` while it lives.
class OwnFilesFaults {
 public:
  explicit OwnFilesFaults(KillPoints& points) {
    adapters::state::setFaultHook([&points](std::string_view, const std::string&) { return points.ownStep(); });
  }
  OwnFilesFaults(const OwnFilesFaults&) = delete;
  OwnFilesFaults& operator=(const OwnFilesFaults&) = delete;
  ~OwnFilesFaults() { adapters::state::setFaultHook(nullptr); }
};

class KillingWriter final : public adapters::sysfs::SysfsWriter {
 public:
  KillingWriter(SysfsWriter& inner, KillPoints& points) : inner_(inner), points_(points) {}
  core::Result<core::Done> write(std::string_view path, std::string_view value) override {
    points_.point();
    if (points_.fails()) return core::Error{EIO, std::string(path), "Input/output error (injected)"};
    auto r = inner_.write(path, value);
    points_.point();
    return r;
  }

 private:
  SysfsWriter& inner_;
  KillPoints& points_;
};

// The sweep's hosts in memory (tmpfs) where there is one: each run syncs iommud's files a dozen
// times, which on a disk costs ten times the run (45 s against 3.5 s for the own-file sweep), and
// what a sync makes durable is not what a sweep judges (a kill leaves the page cache as it was).
class HostsInMemory {
 public:
  HostsInMemory() {
    if (const char* t = std::getenv("TMPDIR"); t != nullptr) was_ = t;
    struct statfs fs {};
    if (::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC && ::access("/dev/shm", W_OK) == 0)
      ::setenv("TMPDIR", "/dev/shm", 1);
  }
  HostsInMemory(const HostsInMemory&) = delete;
  HostsInMemory& operator=(const HostsInMemory&) = delete;
  ~HostsInMemory() {
    if (was_) {
      ::setenv("TMPDIR", was_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

 private:
  std::optional<std::string> was_;
};

// What a kill may leave changed on the host: each group's type, each device's driver, each module
// parameter, each modprobe.d file; keyed by what a record names.
inline std::map<std::string, std::string> hostSettings(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  auto each = [&](const fs::path& dir, auto&& f) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root / dir, ec)) f(e.path());
  };
  auto text = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  each("sys/kernel/iommu_groups", [&](const fs::path& g) { out["group " + g.filename().string()] = text(g / "type"); });
  each("sys/bus/pci/devices", [&](const fs::path& d) {
    std::error_code ec;
    out["driver " + d.filename().string()] = fs::read_symlink(d / "driver", ec).filename().string();
  });
  each("sys/module", [&](const fs::path& m) {
    each(fs::relative(m, root) / "parameters",
         [&](const fs::path& p) { out["param " + m.filename().string() + "." + p.filename().string()] = text(p); });
  });
  each("etc/modprobe.d", [&](const fs::path& f) { out["file /etc/modprobe.d/" + f.filename().string()] = text(f); });
  return out;
}

// The record that names a setting of settingsOf, if any.
inline bool recorded(const std::vector<app::ChangeRecord>& records, const std::string& setting) {
  return std::any_of(records.begin(), records.end(), [&](const app::ChangeRecord& r) {
    switch (r.kind) {
      case core::ChangeKind::Domain: return r.group && setting == "group " + std::to_string(*r.group);
      case core::ChangeKind::ModuleParam: return setting == "param " + r.object;
      case core::ChangeKind::ModprobeConf: return setting == "file " + r.object;
      default: return setting == "ethtool " + r.key;
    }
  });
}

inline std::string differences(const std::map<std::string, std::string>& a,
                               const std::map<std::string, std::string>& b) {
  std::string out;
  for (const auto& [k, v] : b) {
    auto it = a.find(k);
    if (it == a.end() || it->second != v)
      out += "  " + k + ": " + (it == a.end() ? "(none)" : it->second) + " -> " + v + "\n";
  }
  for (const auto& [k, v] : a) {
    if (!b.contains(k)) out += "  " + k + ": " + v + " -> (none)\n";
  }
  return out;
}

// What is wrong after a fault and the next start: a device not bound as at the start, a setting
// changed or removed without a record.
inline std::string unrecorded(const std::map<std::string, std::string>& start,
                              const std::map<std::string, std::string>& after,
                              const std::vector<app::ChangeRecord>& records) {
  std::string problem;
  for (const auto& [k, v] : after) {
    auto was = start.find(k);
    if (was != start.end() && was->second == v) continue;
    if (k.starts_with("driver "))
      problem += "not bound as at the start: " + k + " (" + v + ")\n";
    else if (!recorded(records, k))
      problem += "changed without a record: " + k + " = " + v + "\n";
  }
  for (const auto& [k, v] : start) {
    if (!after.contains(k) && !recorded(records, k)) problem += "removed without a record: " + k + "\n";
  }
  return problem;
}

}  // namespace iommud::testing::crash_sweep
