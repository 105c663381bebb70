// Writes the hosts the fleet tests export into OUTDIR/<name>, as roots for `iommuctl --root`: a
// host with repeated findings (two NVMe groups under the VT-d regression) and the 4096-device host
// of bench/run-status for node_exporter; the named scenarios whose four views
// test_fleet_agreement.py compares. With NAMEs, only those.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/scenarios.hpp"
#include "synthetic_host.hpp"

namespace {

// FakeHost removes its directory on destruction; a renamed one survives.
void keep(iommud::testing::FakeHost& host, const std::filesystem::path& to) {
  std::filesystem::rename(host.root(), to);
}

using Make = std::function<std::unique_ptr<iommud::testing::FakeHost>()>;

const std::map<std::string, Make>& hosts() {
  namespace t = iommud::testing;
  static const std::map<std::string, Make> all = {
      {"two-nvme-pairs", [] { return t::twoNvmePairs(); }},
      {"synthetic-4096",
       [] {
         iommud::bench::HostShape shape;
         return iommud::bench::makeSyntheticHost(1024, shape);
       }},
      {"intel-bare-metal", [] { return t::intelBareMetal(); }},
      {"amd-iommu-pt", [] { return t::amdNewFeatures(); }},
      {"vfio-group-pt", [] { return t::vfioGroup(); }},
      {"thunderbolt-nic", [] { return t::thunderboltNic(); }},
      {"arm-smmu-v3", [] { return t::armSmmuV3(); }},
      {"workstation", [] { return t::workstation(); }},
      {"no-iommu", [] { return t::noIommu(); }},
      {"virtio-guest", [] { return t::virtioGuest(); }},
  };
  return all;
}

int run(const std::filesystem::path& out, std::vector<std::string> names) {
  std::filesystem::create_directories(out);
  if (names.empty()) {
    for (const auto& [name, make] : hosts()) names.push_back(name);
  }
  for (const auto& name : names) {
    auto at = hosts().find(name);
    if (at == hosts().end()) {
      std::fprintf(stderr, "fleet_hosts: no host named %s\n", name.c_str());
      return 2;
    }
    keep(*at->second(), out / name);
    std::printf("%s in %s\n", name.c_str(), out.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUTDIR [NAME...]\n", argv[0]);
    return 2;
  }
  try {
    return run(argv[1], std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fleet_hosts: %s\n", e.what());
    return 1;
  }
}
