// Writes the synthetic hosts of tests/support/scenarios into OUTDIR/<name>, as roots for
// `iommuctl --root`: tests/schema/test_schemas.py validates what iommuctl prints for each.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/scenarios.hpp"

namespace {

using iommud::testing::FakeHost;
using Make = std::function<std::unique_ptr<FakeHost>()>;

// FakeHost removes its directory on destruction; a renamed one survives.
void keep(FakeHost& host, const std::filesystem::path& to) {
  std::filesystem::rename(host.root(), to);
}

int run(const std::filesystem::path& out) {
  namespace t = iommud::testing;
  const std::vector<std::pair<std::string, Make>> hosts = {
      {"intel-bare-metal", t::intelBareMetal},
      {"intel-guest-caching-mode", t::intelGuestCachingMode},
      {"amd-old-features", t::amdOldFeatures},
      {"amd-new-features", t::amdNewFeatures},
      {"arm-smmu-v3", t::armSmmuV3},
      {"no-iommu", t::noIommu},
      {"thunderbolt-nic", t::thunderboltNic},
      {"thunderbolt-nic-with-module", t::thunderboltNicWithModule},
      {"two-nvme-one-group", [] { return t::twoNvmeOneGroup(); }},
      // Linux 6.1: a group of several devices keeps its type (kernel-too-old).
      {"two-nvme-one-group-6.1", [] { return t::twoNvmeOneGroup("6.1.90-1"); }},
      {"vfio-group", t::vfioGroup},
      {"workstation", t::workstation},
  };
  std::filesystem::create_directories(out);
  for (const auto& [name, make] : hosts) {
    auto host = make();
    keep(*host, out / name);
  }
  // A host with a config iommud cannot read: unreadable[] and a mode inferred from the groups.
  auto broken = t::intelBareMetal();
  std::filesystem::remove(broken->root() / "boot/config-6.12.38+deb12-amd64");
  broken->write("/proc/config.gz", "this is not gzip");
  keep(*broken, out / "unreadable-config");
  std::printf("%zu hosts in %s\n", hosts.size() + 1, out.c_str());
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
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
