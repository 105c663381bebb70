// Writes the hosts the fleet test exports for node_exporter into OUTDIR/<name>, as roots for
// `iommuctl --root`: a host with repeated findings (two NVMe groups under the VT-d regression) and
// the 4096-device host of bench/run-status.
#include <cstdio>
#include <exception>
#include <filesystem>

#include "support/scenarios.hpp"
#include "synthetic_host.hpp"

namespace {

// FakeHost removes its directory on destruction; a renamed one survives.
void keep(iommud::testing::FakeHost& host, const std::filesystem::path& to) {
  std::filesystem::rename(host.root(), to);
}

int run(const std::filesystem::path& out) {
  std::filesystem::create_directories(out);
  keep(*iommud::testing::twoNvmePairs(), out / "two-nvme-pairs");
  iommud::bench::HostShape shape;
  keep(*iommud::bench::makeSyntheticHost(1024, shape), out / "synthetic-4096");
  std::printf("two-nvme-pairs, synthetic-4096 (%d PCI devices in %d groups) in %s\n", shape.devices, shape.groups,
              out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fleet_hosts: %s\n", e.what());
    return 1;
  }
}
