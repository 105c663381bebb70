#include "support/scenarios.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace iommud::testing {

namespace fs = std::filesystem;

std::string dmarTable(unsigned char flags) {
  std::string t = std::string("DMAR") + std::string("\x30\x00\x00\x00\x01\x00", 6) + "BOCHS BXPC    " +
                  std::string("\x01\x00\x00\x00", 4) + "BXPC" + std::string("\x01\x00\x00\x00", 4);
  t += static_cast<char>(0x26);
  t += static_cast<char>(flags);
  t += std::string(10, '\0');
  return t;
}

namespace {

// As in Debian 12's 6.1 and 6.12 kernels: VT-d on except for the integrated GPU, lazy.
const std::vector<std::string> kDebianLazy = {"CONFIG_IOMMU_SUPPORT=y",
                                              "CONFIG_INTEL_IOMMU=y",
                                              "# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set",
                                              "CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y",
                                              "# CONFIG_INTEL_IOMMU_DEFAULT_OFF is not set",
                                              "CONFIG_INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON=y",
                                              "CONFIG_AMD_IOMMU=y",
                                              "# CONFIG_IOMMU_DEFAULT_DMA_STRICT is not set",
                                              "CONFIG_IOMMU_DEFAULT_DMA_LAZY=y",
                                              "# CONFIG_IOMMU_DEFAULT_PASSTHROUGH is not set",
                                              "CONFIG_SWIOTLB=y"};

std::unique_ptr<FakeHost> debian612() {
  auto h = std::make_unique<FakeHost>("6.12.38+deb12-amd64");
  h->procVersion(
      "Linux version 6.12.38+deb12-amd64 (debian-kernel@lists.debian.org) (x86_64-linux-gnu-gcc-12 "
      "(Debian 12.2.0-14+deb12u1) 12.2.0) #1 SMP PREEMPT_DYNAMIC Debian 6.12.38-1~deb12u1 (2025-07-16)");
  h->config(kDebianLazy);
  h->firmwareTable("DMAR", dmarTable(0x01));
  return h;
}

// A Titan Ridge enclosure on the Thunderbolt root port `port`: its switch's two ports and an
// AQC100 10 GbE NIC (atlantic) below them, all removable, each in a strict group of its own
// (numbers `group`, +1, +2), the NIC named `netdev` and up.
void titanRidgeAqc100(FakeHost& h, const std::string& port, int bus, int group, const std::string& netdev) {
  auto at = [](int b, const char* devfn) { return fmt::format("0000:{:02x}:{}", b, devfn); };
  const std::string upstream = at(bus, "00.0"), downstream = at(bus + 1, "01.0"), nic = at(bus + 2, "00.0");
  h.pci({.address = upstream,
         .parent = port,
         .device = 0x15ef,
         .classCode = 0x060400,
         .driver = "pcieport",
         .removable = "removable"});
  h.pci({.address = downstream,
         .parent = upstream,
         .device = 0x15ef,
         .classCode = 0x060400,
         .driver = "pcieport",
         .removable = "removable"});
  h.pci({.address = nic,
         .parent = downstream,
         .vendor = 0x1d6a,
         .device = 0x00b1,
         .classCode = 0x020000,
         .driver = "atlantic",
         .removable = "removable",
         .subVendor = 0x1d6a,
         .subDevice = 0x0001});
  h.group(group, "DMA\n", {upstream});
  h.group(group + 1, "DMA\n", {downstream});
  h.group(group + 2, "DMA\n", {nic});
  h.netdev(nic, {.name = netdev, .ifindex = 4, .up = true, .operstate = "up"});
}

}  // namespace

std::unique_ptr<FakeHost> intelBareMetal() {
  auto h = debian612();
  h->cmdline("BOOT_IMAGE=/vmlinuz-6.12.38+deb12-amd64 root=UUID=5d2c0f1e ro quiet");
  h->intelUnit("dmar0", kIntelBareCap, kIntelBareEcap);
  h->intelUnit("dmar1", kIntelBareCap, kIntelBareEcap);
  h->pci({.address = "0000:00:00.0", .device = 0x9b61, .classCode = 0x060000, .driver = "skl_uncore"});
  h->pci({.address = "0000:00:02.0", .device = 0x9b41, .classCode = 0x030000, .driver = "i915", .removable = "fixed"});
  h->bridge("0000:00:1d.0", "", 0x8086, 0x02b0);
  h->pci({.address = "0000:01:00.0",
          .parent = "0000:00:1d.0",
          .vendor = 0x144d,
          .device = 0xa808,
          .classCode = 0x010802,
          .driver = "nvme",
          .removable = "fixed",
          .subVendor = 0x144d,
          .subDevice = 0xa801});
  h->pci(
      {.address = "0000:00:1f.6", .device = 0x0d4f, .classCode = 0x020000, .driver = "e1000e", .removable = "fixed"});
  h->group(0, "DMA-FQ\n", {"0000:00:02.0"});
  h->group(1, "DMA-FQ\n", {"0000:00:00.0"});
  h->group(8, "DMA-FQ\n", {"0000:00:1d.0"});
  h->group(12, "DMA-FQ\n", {"0000:01:00.0"});
  h->group(13, "DMA-FQ\n", {"0000:00:1f.6"});
  h->netdev("0000:00:1f.6", {.name = "eno1", .ifindex = 2});
  h->routes(
      "eno1\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
      "eno1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n");
  h->inet6(
      "fe800000000000003a2c4afffe0c1d2e 02 40 20 80     eno1\n"
      "00000000000000000000000000000001 01 80 10 80       lo\n");
  h->nvme("0000:01:00.0", "nvme0", "Samsung SSD 970 EVO Plus 1TB", "S4EWNX0N123456A",
          {{"nvme0n1", "259:0", {{"nvme0n1p1", "259:1"}, {"nvme0n1p2", "259:2"}, {"nvme0n1p3", "259:3"}}, {}}});
  h->stackedBlock("dm-0", "254:0");
  h->holds("dm-0", "nvme0n1p3");
  h->mountinfo(
      "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n"
      "23 22 259:1 / /boot/efi rw,relatime shared:2 - vfat /dev/nvme0n1p1 rw\n"
      "24 22 254:0 / /home/alice rw,relatime shared:3 - ext4 /dev/mapper/home rw\n"
      "25 22 0:22 / /proc rw,nosuid - proc proc rw\n");
  h->swaps("");
  h->swiotlb(32768, 0, 12);
  return h;
}

std::unique_ptr<FakeHost> intelGuestCachingMode() {
  auto h = std::make_unique<FakeHost>("6.1.0-56-amd64");
  h->procVersion(
      "Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14+deb12u1) "
      "12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2025-08-20)");
  h->cmdline("console=ttyS0 intel_iommu=on");
  h->config(kDebianLazy);
  h->firmwareTable("DMAR");
  h->intelUnit("dmar0", kQemuCap, kQemuEcap);
  h->pci({.address = "0000:00:00.0", .device = 0x29c0, .classCode = 0x060000});
  h->bridge("0000:00:02.0", "", 0x1b36, 0x000c);
  h->pci({.address = "0000:01:00.0",
          .parent = "0000:00:02.0",
          .vendor = 0x1b36,
          .device = 0x0010,
          .classCode = 0x010802,
          .driver = "nvme",
          .removable = "fixed",
          .subVendor = 0x1af4,
          .subDevice = 0x1100});
  h->pci(
      {.address = "0000:00:03.0", .device = 0x10d3, .classCode = 0x020000, .driver = "e1000e", .removable = "fixed"});
  h->group(0, "DMA\n", {"0000:00:00.0"});
  h->group(1, "DMA\n", {"0000:00:02.0"});
  h->group(2, "DMA\n", {"0000:01:00.0"});
  h->group(3, "DMA\n", {"0000:00:03.0"});
  h->netdev("0000:00:03.0", {.name = "enp0s3", .ifindex = 2, .up = false, .operstate = "down"});
  h->nvme("0000:01:00.0", "nvme0", "QEMU NVMe Ctrl", "deadbeef", {{"nvme0n1", "259:0", {}, {}}});
  return h;
}

std::unique_ptr<FakeHost> amdOldFeatures() {
  auto h = std::make_unique<FakeHost>("5.15.0-91-generic");
  h->procVersion(
      "Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
      "11.4.0) #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023");
  h->write("/proc/version_signature", "Ubuntu 5.15.0-91.101-generic 5.15.131\n");
  h->cmdline("BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic root=/dev/mapper/vg-root ro");
  h->config({"CONFIG_AMD_IOMMU=y", "CONFIG_IOMMU_DEFAULT_DMA_LAZY=y", "# CONFIG_IOMMU_DEFAULT_DMA_STRICT is not set",
             "# CONFIG_IOMMU_DEFAULT_PASSTHROUGH is not set"});
  h->firmwareTable("IVRS");
  h->amdUnit("ivhd0", "190b0f", "58f77ef22294ade");
  h->pci({.address = "0000:00:00.0", .vendor = 0x1022, .device = 0x1480, .classCode = 0x060000});
  h->pci({.address = "0000:00:00.2", .vendor = 0x1022, .device = 0x1481, .classCode = 0x080600});
  h->group(0, "DMA-FQ\n", {"0000:00:00.0"});
  return h;
}

std::unique_ptr<FakeHost> amdNewFeatures() {
  auto h = std::make_unique<FakeHost>("6.1.0-56-amd64");
  h->procVersion(
      "Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian "
      "6.1.192-2 (2025-08-20)");
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro iommu=pt");
  h->config(kDebianLazy);
  h->firmwareTable("IVRS");
  h->amdUnit("ivhd0", "40190b0f", "0:25bf7ef22294ade");
  h->pci({.address = "0000:00:00.0", .vendor = 0x1022, .device = 0x14d8, .classCode = 0x060000});
  h->pci({.address = "0000:02:00.0",
          .vendor = 0x10ec,
          .device = 0x8125,
          .classCode = 0x020000,
          .driver = "r8169",
          .removable = "fixed"});
  h->group(0, "identity\n", {"0000:00:00.0"});
  h->group(5, "identity\n", {"0000:02:00.0"});
  return h;
}

std::unique_ptr<FakeHost> armSmmuV3() {
  auto h = std::make_unique<FakeHost>("6.1.0-56-arm64");
  h->procVersion("Linux version 6.1.0-56-arm64 (debian-kernel@lists.debian.org) #1 SMP Debian 6.1.192-2 (2025-08-20)");
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro");
  h->config({"CONFIG_ARM_SMMU_V3=y", "CONFIG_IOMMU_DEFAULT_DMA_STRICT=y", "# CONFIG_IOMMU_DEFAULT_DMA_LAZY is not set",
             "# CONFIG_IOMMU_DEFAULT_PASSTHROUGH is not set"});
  h->firmwareTable("IORT");
  h->otherUnit("smmu3.0x0000000009050000");
  h->pci({.address = "0000:00:00.0", .vendor = 0x1b36, .device = 0x0008, .classCode = 0x060000});
  h->pci({.address = "0000:00:01.0",
          .vendor = 0x8086,
          .device = 0x10fb,
          .classCode = 0x020000,
          .driver = "ixgbe",
          .removable = "fixed",
          .sriovNumVfs = 0});
  h->group(0, "DMA\n", {"0000:00:00.0"});
  h->group(1, "DMA\n", {"0000:00:01.0"});
  h->netdev("0000:00:01.0", {.name = "enp0s1", .ifindex = 2});
  return h;
}

std::unique_ptr<FakeHost> noIommu() {
  auto h = std::make_unique<FakeHost>("6.1.0-56-amd64");
  h->procVersion("Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) #1 SMP Debian 6.1.192-2 (2025-08-20)");
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro quiet");
  h->config({"CONFIG_INTEL_IOMMU=y", "# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set", "CONFIG_IOMMU_DEFAULT_DMA_LAZY=y"});
  h->firmwareTable("DMAR");
  h->pci({.address = "0000:00:00.0", .device = 0x3e30, .classCode = 0x060000});
  h->pci(
      {.address = "0000:00:1f.6", .device = 0x15bc, .classCode = 0x020000, .driver = "e1000e", .removable = "fixed"});
  return h;
}

std::unique_ptr<FakeHost> virtioGuest() {
  auto h = debian612();
  h->machine("x86_64");
  h->cmdline("console=ttyS0 intel_iommu=on");
  h->intelUnit("dmar0", kQemuCap, kQemuEcap);
  h->pci({.address = "0000:00:00.0", .device = 0x29c0, .classCode = 0x060000});
  h->virtio("0000:00:04.0", "virtio0", true);
  h->virtio("0000:00:05.0", "virtio1", false);
  h->group(0, "DMA\n", {"0000:00:00.0"});
  h->group(4, "DMA\n", {"0000:00:04.0"});
  h->group(5, "DMA\n", {"0000:00:05.0"});
  h->cpuFlags("fpu vme de pse tsc msr pae mce cx8 apic hypervisor");
  return h;
}

std::unique_ptr<FakeHost> thunderboltNic() {
  auto h = debian612();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro quiet");
  h->intelUnit("dmar0", kIntelBareCap, kIntelBareEcap);
  h->pci({.address = "0000:00:00.0", .device = 0x9a14, .classCode = 0x060000});
  h->pci({.address = "0000:00:0d.2",
          .device = 0x9a1b,
          .classCode = 0x0c0340,
          .driver = "thunderbolt",
          .removable = "fixed"});
  // Integrated USB4 root port, external facing; a Titan Ridge enclosure behind it.
  h->bridge("0000:00:07.0", "", 0x8086, 0x9a23);
  titanRidgeAqc100(*h, "0000:00:07.0", 3, 15, "enp5s0");
  h->group(0, "DMA-FQ\n", {"0000:00:00.0"});
  h->group(5, "DMA-FQ\n", {"0000:00:0d.2"});
  h->group(6, "DMA-FQ\n", {"0000:00:07.0"});
  h->routes("");
  h->thunderboltDomain("domain0", "user", true);
  h->swiotlb(32768, 1210, 4400);
  return h;
}

std::unique_ptr<FakeHost> thunderboltNicWithModule() {
  auto h = thunderboltNic();
  h->write("/sys/module/atlantic/initstate", "live\n");
  h->write("/sys/module/atlantic/parameters/aq_itr", "65535\n");
  h->write("/sys/module/atlantic/parameters/aq_itr_rx", "0\n");
  fs::permissions(h->root() / "sys/module/atlantic/parameters/aq_itr_rx",
                  fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  h->symlink("../../../../module/atlantic", "/sys/bus/pci/drivers/atlantic/module");
  return h;
}

std::unique_ptr<FakeHost> workstation() {
  auto h = debian612();
  h->cmdline("BOOT_IMAGE=/vmlinuz-6.12.38+deb12-amd64 root=UUID=5d2c0f1e ro quiet");
  h->intelUnit("dmar0", kIntelBareCap, kIntelBareEcap);
  h->intelUnit("dmar1", kIntelBareCap, kIntelBareEcap);
  h->pci({.address = "0000:00:00.0", .device = 0x4660, .classCode = 0x060000});
  h->pci({.address = "0000:00:02.0", .device = 0x4680, .classCode = 0x030000, .driver = "i915", .removable = "fixed"});
  h->pci({.address = "0000:00:0d.2",
          .device = 0x463e,
          .classCode = 0x0c0340,
          .driver = "thunderbolt",
          .removable = "fixed"});
  h->pci(
      {.address = "0000:00:1f.6", .device = 0x1a1c, .classCode = 0x020000, .driver = "e1000e", .removable = "fixed"});
  // The root disk, alone behind its root port.
  h->bridge("0000:00:06.0", "", 0x8086, 0x464d);
  h->pci({.address = "0000:01:00.0",
          .parent = "0000:00:06.0",
          .vendor = 0x144d,
          .device = 0xa80c,
          .classCode = 0x010802,
          .driver = "nvme",
          .removable = "fixed",
          .subVendor = 0x144d,
          .subDevice = 0xa801});
  // Two scratch drives behind a PCIe switch without ACS: one group.
  h->bridge("0000:00:1c.0", "", 0x8086, 0x7ab8);
  h->bridge("0000:02:00.0", "0000:00:1c.0", 0x10b5, 0x8747);
  h->bridge("0000:03:08.0", "0000:02:00.0", 0x10b5, 0x8747);
  h->bridge("0000:03:10.0", "0000:02:00.0", 0x10b5, 0x8747);
  for (const char* addr : {"0000:04:00.0", "0000:05:00.0"}) {
    h->pci({.address = addr,
            .parent = addr == std::string("0000:04:00.0") ? "0000:03:08.0" : "0000:03:10.0",
            .vendor = 0x144d,
            .device = 0xa80a,
            .classCode = 0x010802,
            .driver = "nvme",
            .removable = "fixed"});
  }
  // The Thunderbolt 4 port, an enclosure's switch and the AQC100 behind it.
  h->bridge("0000:00:07.0", "", 0x8086, 0x466e);
  titanRidgeAqc100(*h, "0000:00:07.0", 6, 15, "enp8s0");
  h->group(0, "DMA-FQ\n", {"0000:00:02.0"});
  h->group(1, "DMA-FQ\n", {"0000:00:00.0"});
  h->group(5, "DMA-FQ\n", {"0000:00:0d.2"});
  h->group(6, "DMA-FQ\n", {"0000:00:07.0"});
  h->group(8, "DMA-FQ\n", {"0000:00:06.0"});
  h->group(12, "DMA-FQ\n", {"0000:01:00.0"});
  h->group(13, "DMA-FQ\n", {"0000:00:1f.6"});
  h->group(14, "DMA-FQ\n",
           {"0000:00:1c.0", "0000:02:00.0", "0000:03:08.0", "0000:03:10.0", "0000:04:00.0", "0000:05:00.0"});
  h->netdev("0000:00:1f.6", {.name = "eno1", .ifindex = 2});
  h->routes(
      "eno1\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
      "eno1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n");
  h->nvme("0000:01:00.0", "nvme0", "Samsung SSD 990 PRO 2TB", "S6Z2NJ0W412345K",
          {{"nvme0n1", "259:0", {{"nvme0n1p1", "259:1"}, {"nvme0n1p2", "259:2"}}, {}}});
  h->nvme("0000:04:00.0", "nvme1", "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R100001", {{"nvme1n1", "259:3", {}, {}}});
  h->nvme("0000:05:00.0", "nvme2", "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R100002", {{"nvme2n1", "259:4", {}, {}}});
  h->mountinfo(
      "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n"
      "23 22 259:1 / /boot/efi rw,relatime shared:2 - vfat /dev/nvme0n1p1 rw\n"
      "25 22 0:22 / /proc rw,nosuid - proc proc rw\n");
  h->swaps("");
  h->thunderboltDomain("domain0", "user", true);
  h->swiotlb(32768, 1210, 4400);
  return h;
}

std::unique_ptr<FakeHost> externalPortGuest() {
  auto h = std::make_unique<FakeHost>("6.12.117+deb12-amd64");
  h->procVersion(
      "Linux version 6.12.117+deb12-amd64 (debian-kernel@lists.debian.org) (x86_64-linux-gnu-gcc-12 (Debian "
      "12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian "
      "6.12.117-1~deb12u1 (2026-11-14)");
  h->cmdline("console=ttyS0 quiet panic=-1");
  h->config(kDebianLazy);
  h->firmwareTable("DMAR");
  h->firmwareTable("SSDT");
  h->intelUnit("dmar0", kQemuCm0Cap, kQemuCm0Ecap);
  h->pci({.address = "0000:00:00.0", .device = 0x29c0, .classCode = 0x060000});
  // The kernel writes `removable` only for devices below an external-facing port: the ports and
  // the internal NIC have no such file.
  h->bridge("0000:00:03.0", "", 0x1b36, 0x000c);
  h->pci({.address = "0000:04:00.0",
          .parent = "0000:00:03.0",
          .device = 0x10d3,
          .classCode = 0x020000,
          .driver = "e1000e",
          .subVendor = 0x8086,
          .subDevice = 0x0000});
  h->bridge("0000:00:10.0", "", 0x1b36, 0x000c);
  h->pci({.address = "0000:06:00.0",
          .parent = "0000:00:10.0",
          .device = 0x10d3,
          .classCode = 0x020000,
          .driver = "e1000e",
          .removable = "removable",
          .subVendor = 0x8086,
          .subDevice = 0x0000});
  h->group(0, "DMA-FQ\n", {"0000:00:00.0"});
  h->group(3, "DMA-FQ\n", {"0000:00:03.0"});
  h->group(7, "DMA-FQ\n", {"0000:00:10.0"});
  h->group(11, "DMA-FQ\n", {"0000:04:00.0"});
  h->group(12, "DMA\n", {"0000:06:00.0"});
  h->netdev("0000:04:00.0", {.name = "enp4s0", .ifindex = 2, .up = false, .operstate = "down"});
  h->netdev("0000:06:00.0", {.name = "enp6s0", .ifindex = 3, .up = false, .operstate = "down"});
  // 1 GiB, nothing above 4 GiB: no swiotlb pool, and the kernel leaves its directory empty.
  fs::create_directories(h->root() / "sys/kernel/debug/swiotlb");
  return h;
}

std::unique_ptr<FakeHost> twoNvmeOneGroup(const char* debianVersion) {
  auto h = std::make_unique<FakeHost>("6.12.30+deb12-amd64");
  h->procVersion(std::string("Linux version 6.12.30+deb12-amd64 (debian-kernel@lists.debian.org) #1 SMP "
                             "PREEMPT_DYNAMIC Debian ") +
                 debianVersion + " (2025-06-01)");
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro");
  h->config(kDebianLazy);
  h->firmwareTable("DMAR");
  h->intelUnit("dmar0", kIntelBareCap, kIntelBareEcap);
  h->pci({.address = "0000:00:00.0", .device = 0x09a2, .classCode = 0x060000});
  h->bridge("0000:00:02.0", "", 0x8086, 0x347a);
  h->bridge("0000:01:00.0", "0000:00:02.0", 0x10b5, 0x8747);
  h->bridge("0000:02:08.0", "0000:01:00.0", 0x10b5, 0x8747);
  h->bridge("0000:02:10.0", "0000:01:00.0", 0x10b5, 0x8747);
  h->pci({.address = "0000:03:00.0",
          .parent = "0000:02:08.0",
          .vendor = 0x144d,
          .device = 0xa80a,
          .classCode = 0x010802,
          .driver = "nvme",
          .removable = "fixed"});
  h->pci({.address = "0000:04:00.0",
          .parent = "0000:02:10.0",
          .vendor = 0x144d,
          .device = 0xa80a,
          .classCode = 0x010802,
          .driver = "nvme",
          .removable = "fixed"});
  h->group(0, "DMA-FQ\n", {"0000:00:00.0"});
  h->group(20, "DMA-FQ\n",
           {"0000:00:02.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0", "0000:03:00.0", "0000:04:00.0"});
  h->nvme("0000:03:00.0", "nvme0", "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R100001", {{"nvme0n1", "259:0", {}, {}}});
  h->nvme("0000:04:00.0", "nvme1", "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R100002", {{"nvme1n1", "259:1", {}, {}}});
  h->mountinfo("22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw\n");
  h->swaps("");
  return h;
}

std::unique_ptr<FakeHost> twoNvmePairs() {
  auto h = twoNvmeOneGroup();
  h->bridge("0000:10:00.0", "", 0x8086, 0x347a);
  h->bridge("0000:11:00.0", "0000:10:00.0", 0x10b5, 0x8747);
  for (int i = 0; i < 2; ++i) {
    std::string addr = "0000:1" + std::to_string(2 + i) + ":00.0";
    h->pci({.address = addr,
            .parent = "0000:11:00.0",
            .vendor = 0x144d,
            .device = 0xa80a,
            .classCode = 0x010802,
            .driver = "nvme",
            .removable = "fixed"});
    std::string name = "nvme" + std::to_string(2 + i);
    h->nvme(addr, name, "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R10000" + std::to_string(3 + i),
            {{name + "n1", "259:" + std::to_string(2 + i), {}, {}}});
  }
  h->group(21, "DMA-FQ\n", {"0000:10:00.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0"});
  return h;
}

std::unique_ptr<FakeHost> vfioGroup() {
  auto h = debian612();
  h->cmdline("BOOT_IMAGE=/vmlinuz root=UUID=abcd ro intel_iommu=on iommu=pt vfio-pci.ids=10de:2684");
  h->intelUnit("dmar0", kIntelBareCap, kIntelBareEcap);
  h->pci({.address = "0000:00:00.0", .device = 0x4660, .classCode = 0x060000});
  h->bridge("0000:00:01.0", "", 0x8086, 0x460d);
  h->pci({.address = "0000:01:00.0",
          .parent = "0000:00:01.0",
          .vendor = 0x10de,
          .device = 0x2684,
          .classCode = 0x030000,
          .driver = "vfio-pci",
          .removable = "fixed"});
  h->pci({.address = "0000:01:00.1",
          .parent = "0000:00:01.0",
          .vendor = 0x10de,
          .device = 0x22ba,
          .classCode = 0x040300,
          .driver = "vfio-pci",
          .removable = "fixed"});
  h->group(0, "identity\n", {"0000:00:00.0"});
  h->group(2, "identity\n", {"0000:00:01.0", "0000:01:00.0", "0000:01:00.1"});
  return h;
}

}  // namespace iommud::testing
