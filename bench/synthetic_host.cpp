#include "synthetic_host.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

namespace iommud::bench {
namespace {

namespace fs = std::filesystem;
using testing::FakeHost;

// Bus numbers are 8 bits: each domain's root bus carries 128 bridges, one bus behind each.
constexpr int kGroupsPerDomain = 128;

struct Function {
  uint16_t vendor;
  uint16_t device;
  uint32_t classCode;
  std::optional<std::string> driver;
};

// FakeHost writes what iommud reads; the floor loop also reads subsystem_vendor and
// subsystem_device, which a real device always has.
void addSubsystemIds(FakeHost& host, const std::string& address, uint16_t vendor, uint16_t device) {
  fs::path dir = fs::canonical(host.root() / "sys/bus/pci/devices" / address);
  std::string hostDir = "/" + dir.lexically_relative(host.root()).string();
  host.write(hostDir + "/subsystem_vendor", fmt::format("0x{:04x}\n", vendor));
  host.write(hostDir + "/subsystem_device", fmt::format("0x{:04x}\n", device));
}

}  // namespace

std::unique_ptr<testing::FakeHost> makeSyntheticHost(int groups, HostShape& shape) {
  auto host = std::make_unique<FakeHost>("6.1.0-56-amd64");
  host->procVersion(
      "Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0, "
      "GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2025-07-24)");
  host->cmdline("BOOT_IMAGE=/boot/vmlinuz-6.1.0-56-amd64 root=/dev/nvme0n1p2 ro intel_iommu=on quiet");
  host->config({"CONFIG_IOMMU_SUPPORT=y", "CONFIG_IOMMU_DEFAULT_DMA_LAZY=y", "CONFIG_INTEL_IOMMU=y",
                "# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set"});
  host->firmwareTable("DMAR");

  int domains = (groups + kGroupsPerDomain - 1) / kGroupsPerDomain;
  for (int d = 0; d < domains; ++d) host->intelUnit(fmt::format("dmar{}", d), "d2008c40660462", "f050da");

  const std::vector<std::vector<Function>> kinds = {
      {{0x8086, 0x1563, 0x020000, "ixgbe"}, {0x8086, 0x1563, 0x020000, "ixgbe"}, {0x8086, 0x1563, 0x020000, "ixgbe"}},
      {{0x144d, 0xa824, 0x010802, "nvme"}, {0x144d, 0xa824, 0x010802, "nvme"}, {0x144d, 0xa824, 0x010802, "nvme"}},
      {{0x1002, 0x73bf, 0x030000, "amdgpu"},
       {0x1002, 0xab28, 0x040300, "snd_hda_intel"},
       {0x1002, 0x73a6, 0x0c0330, "xhci_hcd"}},
      {{0x8086, 0x0b25, 0x088000, "idxd"}, {0x8086, 0x0b25, 0x088000, "vfio-pci"}, {0x8086, 0x0b25, 0x088000, {}}},
  };

  int ifindex = 2;
  int nvme = 0;
  for (int g = 0; g < groups; ++g) {
    int domain = g / kGroupsPerDomain;
    int k = g % kGroupsPerDomain;
    int bus = k + 1;
    // Every 16th group sits behind an external (Thunderbolt-like) port.
    std::string removable = g % 16 == 15 ? "removable" : "fixed";
    std::string bridge = fmt::format("{:04x}:00:{:02x}.{:x}", domain, k / 8, k % 8);
    host->pci({.address = bridge,
               .vendor = 0x8086,
               .device = 0x352a,
               .classCode = 0x060400,
               .driver = "pcieport",
               .removable = removable,
               .subVendor = 0x8086});
    addSubsystemIds(*host, bridge, 0x8086, 0x0000);
    std::vector<std::string> members{bridge};

    const auto& functions = kinds[static_cast<size_t>(g % 4)];
    for (int fn = 0; fn < 3; ++fn) {
      const auto& f = functions[static_cast<size_t>(fn)];
      std::string address = fmt::format("{:04x}:{:02x}:00.{}", domain, bus, fn);
      bool nvmePf = f.classCode == 0x010802 && fn == 0;
      auto subDevice = static_cast<uint16_t>(0xa801 + fn);
      host->pci({.address = address,
                 .parent = bridge,
                 .vendor = f.vendor,
                 .device = f.device,
                 .classCode = f.classCode,
                 .driver = f.driver,
                 .removable = removable,
                 .sriovNumVfs = nvmePf ? 2 : -1,
                 .subVendor = f.vendor,
                 .subDevice = subDevice});
      addSubsystemIds(*host, address, f.vendor, subDevice);
      members.push_back(address);

      if (f.classCode == 0x020000) {
        host->netdev(address, {.name = fmt::format("enp{}s0f{}", bus + 256 * domain, fn), .ifindex = ifindex++});
        ++shape.netdevs;
      } else if (f.classCode == 0x010802) {
        std::string ctrl = fmt::format("nvme{}", nvme);
        std::string ns = ctrl + "n1";
        host->nvme(
            address, ctrl, "SAMSUNG MZWLJ3T8HBLS-00007", fmt::format("S4YPNE0R{:06}", nvme),
            {{ns,
              fmt::format("259:{}", 3 * nvme),
              {{ns + "p1", fmt::format("259:{}", 3 * nvme + 1)}, {ns + "p2", fmt::format("259:{}", 3 * nvme + 2)}},
              {}}});
        ++nvme;
        ++shape.nvmeControllers;
      }
    }
    host->group(g, g % 4 == 3 ? "DMA" : "DMA-FQ\n", members);
    shape.devices += static_cast<int>(members.size());
    ++shape.groups;
  }

  // The first drive holds the root file system and swap; the first NIC carries the routes.
  host->mountinfo(
      "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
      "23 28 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw\n"
      "28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n"
      "31 28 259:1 / /boot/efi rw,relatime shared:30 - vfat /dev/nvme0n1p1 rw\n");
  host->swaps("/dev/nvme1n1p2                          partition\t8388604\t\t0\t\t-2\n");
  host->routes(
      "enp1s0f0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
      "enp1s0f0\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n");
  host->inet6("fe80000000000000021b21fffe3a4c5d 02 40 20 80 enp1s0f0\n");
  return host;
}

}  // namespace iommud::bench
