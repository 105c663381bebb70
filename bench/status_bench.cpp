// Issue 2, point 6: `iommuctl status --json` on a synthetic host of 4096 PCI devices in 1024
// groups, timed side by side with the floor (bench_floor: open+read six attributes and the
// driver link per device) and with the classic shell loop over /sys/kernel/iommu_groups.
// All three run as processes, interleaved round by round so that noise hits them alike.
//
// Usage: bench_status IOMMUCTL FLOOR [--runs=N] [--shell-runs=N] [--groups=N] [--keep] [--also=IOMMUCTL2]
//   --keep leaves the synthetic host on disk (for profiling) and prints where.
//   --also times a second iommuctl (a patched build) as (b'), to compare a change in one run.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/sysfs/host_reader.hpp"
#include "synthetic_host.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The classic loop, with lspci replaced by cat: lspci cannot read a root other than /sys (and
// `lspci -s` rescans every device on each call). Three cats per device, as the common variant
// prints "[vendor:device] class".
constexpr const char* kShellLoop =
    R"sh(for g in "$1"/sys/kernel/iommu_groups/*; do for d in $g/devices/*; do )sh"
    R"sh(echo "group ${g##*/}: ${d##*/} [$(cat $d/vendor):$(cat $d/device)] class $(cat $d/class)"; )sh"
    R"sh(done; done)sh";

// Runs argv with stdout to `out` (a path) and returns the wall time in milliseconds; exits the
// benchmark if the command fails, since a failing command's time means nothing.
double timeProcess(const std::vector<std::string>& argv, const char* out = "/dev/null") {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: posix_spawn's signature
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

  auto start = Clock::now();
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  auto end = Clock::now();
  posix_spawn_file_actions_destroy(&actions);

  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_status: %s failed (spawn %d, status %d)\n", argv[0].c_str(), rc, status);
    std::exit(1);
  }
  return std::chrono::duration<double, std::milli>(end - start).count();
}

struct Series {
  const char* label;
  std::vector<std::string> argv;
  int runs;
  std::vector<double> ms;

  [[nodiscard]] double median() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
  [[nodiscard]] double min() const { return *std::min_element(ms.begin(), ms.end()); }
  [[nodiscard]] double max() const { return *std::max_element(ms.begin(), ms.end()); }
};

int intOption(std::string_view arg, std::string_view name, int current) {
  if (!arg.starts_with(name)) return current;
  return std::atoi(std::string(arg.substr(name.size())).c_str());
}

// The benchmark only means something if iommuctl really read the whole host.
void checkStatusCovers(const std::string& jsonPath, const iommud::bench::HostShape& shape) {
  std::ifstream in(jsonPath);
  auto status = nlohmann::json::parse(in);
  auto devices = static_cast<int>(status.at("devices").size());
  auto groups = static_cast<int>(status.at("groups").size());
  if (devices != shape.devices || groups != shape.groups) {
    std::fprintf(stderr, "bench_status: iommuctl saw %d devices in %d groups, the host has %d in %d\n", devices, groups,
                 shape.devices, shape.groups);
    std::exit(1);
  }
}

// Reads the host once through a recording Root, as status does, and writes what it read: one
// "F path" (a file), "L path" (a link), "D path" (a directory) or "M path" (looked for, not
// there) per line.
void writeReads(const std::string& root, const std::string& path) {
  iommud::adapters::sysfs::Recorder recorder;
  const iommud::adapters::sysfs::Root recorded(root, &recorder);
  if (!iommud::adapters::sysfs::readHost(recorded)) {
    std::fprintf(stderr, "bench_status: cannot read the synthetic host\n");
    std::exit(1);
  }
  std::ofstream out(path);
  for (const auto& c : recorder.captures()) {
    using Kind = iommud::adapters::sysfs::Capture::Kind;
    const char kind = c.kind == Kind::File ? 'F' : c.kind == Kind::Link ? 'L' : c.kind == Kind::Dir ? 'D' : 'M';
    out << kind << ' ' << c.path << '\n';
  }
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s IOMMUCTL FLOOR [--runs=N] [--shell-runs=N] [--groups=N] [--keep] [--also=IOMMUCTL2]\n",
                 argv[0]);
    return 2;
  }
  int runs = 15;
  int shellRuns = 3;
  int groups = 1024;
  bool keep = false;
  std::string also;
  for (int i = 3; i < argc; ++i) {
    std::string_view arg = argv[i];
    keep = keep || arg == "--keep";
    if (arg.starts_with("--also=")) also = arg.substr(7);
    runs = intOption(argv[i], "--runs=", runs);
    shellRuns = intOption(argv[i], "--shell-runs=", shellRuns);
    groups = intOption(argv[i], "--groups=", groups);
  }
  runs = std::max(runs, 1);
  shellRuns = std::clamp(shellRuns, 0, runs);

  auto built = Clock::now();
  iommud::bench::HostShape shape;
  auto host = iommud::bench::makeSyntheticHost(groups, shape);
  double buildMs = std::chrono::duration<double, std::milli>(Clock::now() - built).count();
  std::string root = host->rootString();
  std::printf("synthetic host: %d PCI devices in %d groups (%d netdevs, %d NVMe controllers), built in %.0f ms\n",
              shape.devices, shape.groups, shape.netdevs, shape.nvmeControllers, buildMs);
  std::printf("  root %s\n", root.c_str());

  // What status reads, as its reader's Recorder captures it, for the floor that reads just that.
  const std::string readsPath = root + "-reads.txt";
  writeReads(root, readsPath);
  Series floor{"(a) floor: read 6 attributes + driver link", {argv[2], root}, runs, {}};
  Series contained{"(a') floor: what status reads, contained", {argv[2], root, "--reads=" + readsPath}, runs, {}};
  Series status{"(b) iommuctl --root DIR status --json", {argv[1], "--root", root, "status", "--json"}, runs, {}};
  Series shell{"(c) shell loop over iommu_groups (cat)", {"/bin/bash", "-c", kShellLoop, "bench", root}, shellRuns, {}};
  Series other{
      "(b') the other iommuctl (--also)", {also, "--root", root, "status", "--json"}, also.empty() ? 0 : runs, {}};

  // Warm the page and dentry caches (and check the output) before anything is timed.
  std::string jsonPath = (std::filesystem::temp_directory_path() / "iommud-bench-status-XXXXXX").string();
  ::close(::mkstemp(jsonPath.data()));
  timeProcess(status.argv, jsonPath.c_str());
  checkStatusCovers(jsonPath, shape);
  std::remove(jsonPath.c_str());
  for (int i = 0; i < 2; ++i) {
    timeProcess(floor.argv);
    timeProcess(contained.argv);
    timeProcess(status.argv);
    if (other.runs > 0) timeProcess(other.argv);
  }

  std::printf("  %d rounds (shell loop in the first %d), interleaved...\n", runs, shellRuns);
  std::fflush(stdout);
  for (int i = 0; i < runs; ++i) {
    floor.ms.push_back(timeProcess(floor.argv));
    contained.ms.push_back(timeProcess(contained.argv));
    status.ms.push_back(timeProcess(status.argv));
    if (i < other.runs) other.ms.push_back(timeProcess(other.argv));
    if (i < shellRuns) shell.ms.push_back(timeProcess(shell.argv));
  }

  std::printf("\n%-46s %10s %10s %10s %5s\n", "", "median", "min", "max", "runs");
  for (const Series* s : {&floor, &contained, &status, &other, &shell}) {
    if (s->ms.empty()) continue;
    std::printf("%-46s %7.1f ms %7.1f ms %7.1f ms %5zu\n", s->label, s->median(), s->min(), s->max(), s->ms.size());
  }
  double ratio = status.median() / floor.median();
  std::printf("\n(b)/(a) = %.2fx by median, %.2fx by min (target: within 2x): %s\n", ratio, status.min() / floor.min(),
              ratio <= 2.0 ? "met" : "NOT MET");
  const double exact = status.median() / contained.median();
  std::printf("(b)/(a') = %.2fx by median, %.2fx by min (target: within 1.1x): %s\n", exact,
              status.min() / contained.min(), exact <= 1.1 ? "met" : "NOT MET");
  if (!other.ms.empty()) {
    std::printf("(b')/(a) = %.2fx by median, (b')/(a') = %.2fx\n", other.median() / floor.median(),
                other.median() / contained.median());
  }
  if (!shell.ms.empty()) std::printf("(c)/(b) = %.0fx\n", shell.median() / status.median());

  if (keep) {
    // FakeHost removes its directory on destruction; a renamed one survives. The list of what
    // status reads (paths inside the root) is kept beside it, for `bench_floor KEPT --reads=LIST`.
    std::string kept = root + "-kept";
    std::filesystem::rename(root, kept);
    std::filesystem::rename(readsPath, kept + "-reads.txt");
    std::printf("synthetic host kept in %s (what status reads: %s-reads.txt)\n", kept.c_str(), kept.c_str());
  } else {
    std::remove(readsPath.c_str());
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_status: %s\n", e.what());
    return 1;
  }
}
