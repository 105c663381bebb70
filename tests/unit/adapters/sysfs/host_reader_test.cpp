#include "adapters/sysfs/host_reader.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "support/scenarios.hpp"

namespace host_reader_test {

using namespace iommud;
using namespace iommud::core;
using iommud::testing::FakeHost;

HostFacts read(const FakeHost& h) {
  auto r = adapters::sysfs::readHost(adapters::sysfs::Root(h.rootString()));
  if (!r) throw std::runtime_error(r.error().describe());
  return std::move(r).value();
}

bool hasReason(const PciDevice& d, InUseReason::Kind kind, const std::string& detail) {
  for (const auto& r : d.inUse) {
    if (r.kind == kind && r.detail == detail) return true;
  }
  return false;
}

TEST(HostReader, ReadsIntelUnitsGroupsAndDevices) {
  auto h = read(*iommud::testing::intelBareMetal());
  EXPECT_EQ(h.kernel.release, "6.12.38+deb12-amd64");
  EXPECT_EQ(h.kernel.upstream.version, (KernelVersion{6, 12, 38}));
  EXPECT_EQ(h.kernel.configSource, "/boot/config-6.12.38+deb12-amd64");
  EXPECT_EQ(h.kernel.config.at("CONFIG_IOMMU_DEFAULT_DMA_LAZY"), "y");
  ASSERT_EQ(h.units.size(), 2U);
  EXPECT_EQ(h.units[0].name, "dmar0");
  EXPECT_EQ(h.units[0].vendor, Vendor::Intel);
  ASSERT_TRUE(h.units[0].intel);
  EXPECT_EQ(h.units[0].intel->cap, 0xd2008c40660462ULL);
  EXPECT_EQ(h.units[0].version, "1:0");
  EXPECT_EQ(h.vendor(), Vendor::Intel);
  ASSERT_EQ(h.groups.size(), 5U);
  EXPECT_EQ(h.groups[0].id, 0);
  EXPECT_EQ(h.groups[4].id, 13);  // sorted numerically, not as text
  EXPECT_EQ(h.groups[3].type, DomainType::DmaFq);
  EXPECT_EQ(h.firmware.tables, (std::vector<std::string>{"DMAR"}));
  EXPECT_EQ(h.firmware.dmarPlatformOptIn, false);  // flags 0x01: interrupt remapping only

  const auto* nvme = h.device("0000:01:00.0");
  ASSERT_NE(nvme, nullptr);
  EXPECT_EQ(nvme->vendorId, 0x144d);
  EXPECT_EQ(nvme->deviceId, 0xa808);
  EXPECT_EQ(nvme->subsystemDeviceId, 0xa801);
  EXPECT_EQ(nvme->classCode, 0x010802U);
  EXPECT_EQ(nvme->driver, "nvme");
  EXPECT_EQ(nvme->group, 12);
  EXPECT_EQ(nvme->removable, Removable::Fixed);
  EXPECT_EQ(nvme->bridges, (std::vector<std::string>{"0000:00:1d.0"}));
  EXPECT_EQ(nvme->kind(), DeviceKind::Nvme);
  ASSERT_EQ(nvme->nvme.size(), 1U);
  EXPECT_EQ(nvme->nvme[0].model, "Samsung SSD 970 EVO Plus 1TB");
  EXPECT_EQ(nvme->nvme[0].serial, "S4EWNX0N123456A");
  ASSERT_EQ(nvme->nvme[0].namespaces.size(), 1U);
  EXPECT_EQ(nvme->nvme[0].namespaces[0].partitions.size(), 3U);
  EXPECT_EQ(h.swiotlb.nslabs, 32768U);
  EXPECT_EQ(h.swiotlb.usedHiwater, 12U);
}

TEST(HostReader, ReadsAnEmptySwiotlbDirectoryAsNoPool) {
  // Recorded from the tests/vm untrusted guest (1 GiB): the directory is there, empty.
  auto h = read(*iommud::testing::externalPortGuest());
  EXPECT_EQ(h.swiotlb.nslabs, 0U);
  EXPECT_FALSE(h.swiotlb.used);
  EXPECT_TRUE(h.unreadable.empty());
  const auto* nic = h.device("0000:06:00.0");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->removable, Removable::Removable);
  EXPECT_TRUE(nic->untrusted());
  EXPECT_FALSE(nic->thunderbolt);
  EXPECT_EQ(h.device("0000:04:00.0")->removable, Removable::Absent);
}

TEST(HostReader, LeavesTheSwiotlbPoolUnknownAndSaysDebugfsIsNotMounted) {
  // Unmounted, debugfs leaves sysfs' empty mount point.
  auto h = iommud::testing::externalPortGuest();
  std::filesystem::remove(h->root() / "sys/kernel/debug/swiotlb");
  ASSERT_TRUE(std::filesystem::is_empty(h->root() / "sys/kernel/debug"));
  auto facts = read(*h);
  EXPECT_FALSE(facts.swiotlb.nslabs);
  ASSERT_EQ(facts.unreadable.size(), 1U);
  EXPECT_EQ(facts.unreadable[0].path, (h->root() / "sys/kernel/debug").string());
  EXPECT_EQ(facts.unreadable[0].reason,
            "debugfs is not mounted (mount it with: mount -t debugfs none /sys/kernel/debug)");
}

TEST(HostReader, SaysNothingOfAMountedDebugfsWithoutSwiotlb) {
  // A kernel that keeps no swiotlb directory in a mounted debugfs: unknown, and nothing unreadable.
  auto h = iommud::testing::externalPortGuest();
  std::filesystem::remove(h->root() / "sys/kernel/debug/swiotlb");
  std::filesystem::create_directories(h->root() / "sys/kernel/debug/dma_pools");
  auto facts = read(*h);
  EXPECT_FALSE(facts.swiotlb.nslabs);
  EXPECT_TRUE(facts.unreadable.empty());
}

TEST(HostReader, SaysWhyAMountedNvmeIsInUse) {
  auto h = read(*iommud::testing::intelBareMetal());
  const auto* nvme = h.device("0000:01:00.0");
  ASSERT_NE(nvme, nullptr);
  EXPECT_TRUE(hasReason(*nvme, InUseReason::Kind::RootDevice, "nvme0n1p2 holds the root filesystem"));
  EXPECT_TRUE(hasReason(*nvme, InUseReason::Kind::Mounted, "nvme0n1p1 is mounted at /boot/efi"));
  EXPECT_TRUE(hasReason(*nvme, InUseReason::Kind::Held, "nvme0n1p3 is held by dm-0"));
  EXPECT_TRUE(hasReason(*nvme, InUseReason::Kind::Mounted, "nvme0n1p3 (via dm-0) is mounted at /home/alice"));
}

TEST(HostReader, SaysWhyANicIsInUse) {
  auto h = read(*iommud::testing::intelBareMetal());
  const auto* nic = h.device("0000:00:1f.6");
  ASSERT_NE(nic, nullptr);
  ASSERT_EQ(nic->netdevs.size(), 1U);
  EXPECT_EQ(nic->netdevs[0].name, "eno1");
  EXPECT_EQ(nic->netdevs[0].ifindex, 2);
  EXPECT_TRUE(nic->netdevs[0].up);
  EXPECT_TRUE(hasReason(*nic, InUseReason::Kind::NetRoute, "eno1 is up and carries routes"));
  // Only a link-local IPv6 address: that alone is not a reason.
  EXPECT_FALSE(nic->netdevs[0].hasGlobalAddress);
}

TEST(HostReader, ANicThatIsDownOrOnlyUpIsNotInUse) {
  auto h = read(*iommud::testing::intelGuestCachingMode());
  const auto* nic = h.device("0000:00:03.0");
  ASSERT_NE(nic, nullptr);
  EXPECT_TRUE(nic->inUse.empty());
  auto tb = read(*iommud::testing::thunderboltNic());
  EXPECT_TRUE(tb.device("0000:05:00.0")->inUse.empty());  // up, but no route or address
}

TEST(HostReader, ANicEnslavedToABondIsInUse) {
  FakeHost h;
  h.pci({.address = "0000:00:03.0", .classCode = 0x020000, .driver = "ixgbe"});
  h.netdev("0000:00:03.0", {.name = "eth0", .ifindex = 3, .up = true, .operstate = "up", .master = "bond0"});
  auto host = read(h);
  EXPECT_TRUE(hasReason(*host.device("0000:00:03.0"), InUseReason::Kind::NetMaster, "eth0 is enslaved to bond0"));
}

TEST(HostReader, SwapVfioAndSriovMakeADeviceInUse) {
  FakeHost h;
  h.pci({.address = "0000:00:04.0", .classCode = 0x010802, .driver = "nvme"});
  h.pci({.address = "0000:00:05.0", .classCode = 0x020000, .driver = "ice", .sriovNumVfs = 8});
  h.pci({.address = "0000:00:06.0", .classCode = 0x030000, .driver = "vfio-pci"});
  h.nvme("0000:00:04.0", "nvme0", "X", "1", {{"nvme0n1", "259:0", {{"nvme0n1p1", "259:1"}}, {}}});
  h.swaps("/dev/nvme0n1p1 partition 8388604 0 -2\n");
  h.mountinfo("");
  auto host = read(h);
  EXPECT_TRUE(hasReason(*host.device("0000:00:04.0"), InUseReason::Kind::Swap, "nvme0n1p1 is used as swap"));
  ASSERT_EQ(host.device("0000:00:05.0")->inUse.size(), 1U);
  EXPECT_EQ(host.device("0000:00:05.0")->inUse[0].kind, InUseReason::Kind::SriovVfs);
  ASSERT_EQ(host.device("0000:00:06.0")->inUse.size(), 1U);
  EXPECT_EQ(host.device("0000:00:06.0")->inUse[0].kind, InUseReason::Kind::Vfio);
}

TEST(HostReader, DetectsAThunderboltTunnelFromTheBridges) {
  auto h = read(*iommud::testing::thunderboltNic());
  const auto* nic = h.device("0000:05:00.0");
  ASSERT_NE(nic, nullptr);
  EXPECT_TRUE(nic->thunderbolt);
  EXPECT_TRUE(nic->untrusted());
  EXPECT_EQ(nic->thunderboltWhy, "below Thunderbolt bridge 0000:03:00.0");
  EXPECT_EQ(nic->bridges, (std::vector<std::string>{"0000:00:07.0", "0000:03:00.0", "0000:04:01.0"}));
  EXPECT_FALSE(h.device("0000:00:0d.2")->thunderbolt);  // the host's own NHI
  EXPECT_FALSE(h.device("0000:00:07.0")->thunderbolt);
  ASSERT_EQ(h.thunderbolt.size(), 1U);
  EXPECT_EQ(h.thunderbolt[0].security, "user");
  EXPECT_EQ(h.thunderbolt[0].iommuDmaProtection, true);
}

TEST(HostReader, ARemovableDeviceIsTunnelledWhenAThunderboltDomainExists) {
  FakeHost h;
  h.bridge("0000:00:07.0");
  h.pci({.address = "0000:3a:00.0",
         .parent = "0000:00:07.0",
         .classCode = 0x020000,
         .driver = "igc",
         .removable = "removable"});
  auto without = read(h);
  EXPECT_FALSE(without.device("0000:3a:00.0")->thunderbolt);
  EXPECT_TRUE(without.device("0000:3a:00.0")->untrusted());
  h.thunderboltDomain("domain0", "nopcie", std::nullopt);
  auto with = read(h);
  EXPECT_TRUE(with.device("0000:3a:00.0")->thunderbolt);
  EXPECT_FALSE(with.thunderbolt[0].iommuDmaProtection);
}

TEST(HostReader, ReadsAmdFeaturesInBothFormats) {
  auto oldHost = read(*iommud::testing::amdOldFeatures());
  ASSERT_TRUE(oldHost.units.at(0).amd);
  EXPECT_EQ(oldHost.units[0].amd->efr, 0x58f77ef22294adeULL);
  EXPECT_FALSE(oldHost.units[0].amd->efr2);
  EXPECT_EQ(oldHost.kernel.upstream.version, (KernelVersion{5, 15, 131}));
  auto newHost = read(*iommud::testing::amdNewFeatures());
  ASSERT_TRUE(newHost.units.at(0).amd);
  EXPECT_EQ(newHost.units[0].amd->efr2, 0U);
  EXPECT_EQ(newHost.units[0].amd->efr, 0x25bf7ef22294adeULL);
  EXPECT_EQ(newHost.vendor(), Vendor::Amd);
}

TEST(HostReader, ReadsAnArmSmmuV3) {
  auto h = read(*iommud::testing::armSmmuV3());
  ASSERT_EQ(h.units.size(), 1U);
  EXPECT_EQ(h.units[0].vendor, Vendor::ArmSmmuV3);
  EXPECT_FALSE(h.units[0].intel);
  EXPECT_EQ(h.device("0000:00:01.0")->sriovNumVfs, 0);
}

TEST(HostReader, ReadsTheInterruptChipsOnArm64Only) {
  auto arm = iommud::testing::armSmmuV3();
  arm->write("/sys/kernel/irq/1/chip_name", "GICv3\n");
  arm->write("/sys/kernel/irq/2/chip_name", "ITS-MSI\n");
  arm->write("/sys/kernel/irq/3/chip_name", "ITS-MSI\n");
  EXPECT_EQ(read(*arm).irqChips, (std::set<std::string>{"GICv3", "ITS-MSI"}));
  auto x86 = iommud::testing::noIommu();
  x86->write("/sys/kernel/irq/1/chip_name", "IR-PCI-MSI-0000:00:1f.6\n");
  EXPECT_TRUE(read(*x86).irqChips.empty());
}

TEST(HostReader, AnEmptyGroupDirectoryMeansNoTranslation) {
  auto h = read(*iommud::testing::noIommu());
  EXPECT_TRUE(h.groups.empty());
  EXPECT_TRUE(h.units.empty());
  EXPECT_FALSE(h.iommuPresent());
  EXPECT_EQ(h.vendor(), Vendor::None);
  EXPECT_FALSE(h.device("0000:00:1f.6")->group);
}

TEST(HostReader, ToleratesTheMissingNewlineOfOldKernelsAndUnknownTypes) {
  FakeHost h("4.19.0-27-amd64");
  h.pci({.address = "0000:00:02.0", .classCode = 0x030000});
  h.pci({.address = "0000:00:03.0", .classCode = 0x030000});
  h.group(0, "DMA", {"0000:00:02.0"});
  h.group(1, "weird\n", {"0000:00:03.0"});
  auto host = read(h);
  EXPECT_EQ(host.groups[0].type, DomainType::Dma);
  EXPECT_FALSE(host.groups[1].type);
  EXPECT_EQ(host.groups[1].typeText, "weird");
}

TEST(HostReader, ReadsTheConfigFromProcConfigGz) {
  FakeHost h;
  std::ifstream in(std::string(IOMMUD_TEST_DATA) + "/config.gz", std::ios::binary);
  h.write("/proc/config.gz", std::string(std::istreambuf_iterator<char>(in), {}));
  auto host = read(h);
  EXPECT_EQ(host.kernel.configSource, "/proc/config.gz");
  EXPECT_EQ(host.kernel.config.at("CONFIG_IOMMU_DEFAULT_DMA_LAZY"), "y");
  EXPECT_EQ(host.kernel.config.at("CONFIG_IOMMU_DEFAULT_PASSTHROUGH"), "n");
  EXPECT_FALSE(host.kernel.config.contains("CONFIG_HZ"));
}

// What a recording read of `h` with `boot` read of the kernel's and the firmware's files.
std::vector<std::string> bootReads(const FakeHost& h, adapters::sysfs::BootFacts& boot, HostFacts* out = nullptr) {
  adapters::sysfs::Recorder recorder;
  auto r = adapters::sysfs::readHost(adapters::sysfs::Root(h.rootString(), &recorder), &boot);
  if (!r) throw std::runtime_error(r.error().describe());
  if (out != nullptr) *out = std::move(r).value();
  std::vector<std::string> paths;
  for (const auto& c : recorder.captures()) {
    if (c.path == "/proc/cmdline" || c.path == "/proc/version" || c.path.starts_with("/boot/config-") ||
        c.path == "/proc/config.gz" || c.path.starts_with("/sys/firmware"))
      paths.push_back(c.path);
  }
  return paths;
}

// A standing reader reads the kernel's and the firmware's facts once: the next read takes them
// from what it kept, and gives the same host.
TEST(HostReader, KeepsTheKernelAndFirmwareFactsBetweenReadsOfOneBoot) {
  auto h = iommud::testing::intelBareMetal();
  adapters::sysfs::BootFacts boot;
  HostFacts first;
  HostFacts second;
  EXPECT_FALSE(bootReads(*h, boot, &first).empty());
  EXPECT_EQ(boot.release, "6.12.38+deb12-amd64");
  ASSERT_TRUE(boot.kernel && boot.firmware);
  h->write("/proc/cmdline", "changed behind a boot's back\n");  // not read again
  EXPECT_EQ(bootReads(*h, boot, &second), std::vector<std::string>{});
  EXPECT_EQ(second.kernel.cmdline, first.kernel.cmdline);
  EXPECT_EQ(second.kernel.config, first.kernel.config);
  EXPECT_EQ(second.kernel.configSource, first.kernel.configSource);
  EXPECT_EQ(second.kernel.upstream.version, first.kernel.upstream.version);
  EXPECT_EQ(second.kernel.arch, first.kernel.arch);
  EXPECT_EQ(second.kernel.iommuCmdline.params.size(), first.kernel.iommuCmdline.params.size());
  EXPECT_EQ(second.firmware.tables, first.firmware.tables);
  EXPECT_EQ(second.firmware.dmarPlatformOptIn, first.firmware.dmarPlatformOptIn);
  EXPECT_EQ(second.units.size(), first.units.size());  // read every time
  EXPECT_EQ(second.devices.size(), first.devices.size());
}

// Another release (another kernel: a root swapped, a test's host) reads them again.
TEST(HostReader, ReadsTheBootFactsAgainUnderAnotherRelease) {
  auto h = iommud::testing::intelBareMetal();
  adapters::sysfs::BootFacts boot;
  (void)bootReads(*h, boot);
  h->write("/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
  h->write("/proc/cmdline", "intel_iommu=off\n");
  HostFacts again;
  EXPECT_NE(bootReads(*h, boot, &again), std::vector<std::string>{});
  EXPECT_EQ(boot.release, "6.1.0-18-amd64");
  EXPECT_EQ(again.kernel.cmdline, "intel_iommu=off");
}

// A part with something unreadable is not kept: the next read tries it again, and says again
// what it could not read.
TEST(HostReader, KeepsNoBootFactsItCouldNotReadWhole) {
  FakeHost h;
  h.write("/proc/config.gz", "not gzip at all");
  adapters::sysfs::BootFacts boot;
  HostFacts first;
  HostFacts second;
  (void)bootReads(h, boot, &first);
  EXPECT_FALSE(boot.kernel);
  const auto reads = bootReads(h, boot, &second);
  EXPECT_NE(std::find(reads.begin(), reads.end(), "/proc/config.gz"), reads.end());
  ASSERT_EQ(second.unreadable.size(), first.unreadable.size());
  ASSERT_FALSE(second.unreadable.empty());
  EXPECT_EQ(second.unreadable.front().path, h.rootString() + "/proc/config.gz");
}

TEST(HostReader, FailsClearlyWhenTheRootIsNotAHost) {
  auto r = adapters::sysfs::readHost(adapters::sysfs::Root("/nonexistent-root"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "/nonexistent-root/proc/sys/kernel/osrelease");
  EXPECT_NE(r.error().describe().find("No such file or directory"), std::string::npos);
  EXPECT_NE(r.error().describe().find("a host root or an unpacked snapshot"), std::string::npos);
}

TEST(HostReader, FollowsStackedDevicesToTheRootFilesystem) {
  FakeHost h;
  h.pci({.address = "0000:00:04.0", .classCode = 0x010802, .driver = "nvme"});
  h.nvme("0000:00:04.0", "nvme0", "X", "1", {{"nvme0n1", "259:0", {{"nvme0n1p2", "259:2"}}, {}}});
  h.stackedBlock("dm-0", "254:0");  // dm-crypt
  h.stackedBlock("dm-1", "254:1");  // LVM root on top of it
  h.holds("dm-0", "nvme0n1p2");
  h.holds("dm-1", "dm-0");
  h.mountinfo("22 1 254:1 / / rw - ext4 /dev/mapper/vg-root rw\n");
  auto host = read(h);
  const auto* d = host.device("0000:00:04.0");
  EXPECT_TRUE(hasReason(*d, InUseReason::Kind::Held, "nvme0n1p2 is held by dm-0"));
  EXPECT_TRUE(hasReason(*d, InUseReason::Kind::Held, "nvme0n1p2 is held by dm-1"));
  EXPECT_TRUE(hasReason(*d, InUseReason::Kind::RootDevice, "nvme0n1p2 (via dm-1) holds the root filesystem"));
}

TEST(HostReader, ReadsTheConfigSpaceOfSharedGroupsAndTheirBridgesNotingItInAddressOrder) {
  // A shared group's members have their config space read with them, the bridges above them after
  // all devices: what cannot be read is noted under the devices' links, in the order of the addresses.
  FakeHost h;
  h.bridge("0000:00:1c.0").bridge("0000:00:1d.0");
  for (const char* a : {"0000:02:00.0", "0000:02:00.1"}) h.pci({.address = a, .parent = "0000:00:1c.0"});
  h.pci({.address = "0000:03:00.0", .parent = "0000:00:1d.0"});
  h.group(1, "DMA", {"0000:00:1c.0"}).group(2, "DMA", {"0000:02:00.0", "0000:02:00.1"});
  h.group(3, "DMA", {"0000:00:1d.0"}).group(4, "DMA", {"0000:03:00.0"});
  for (const char* a : {"0000:00:1d.0", "0000:02:00.1", "0000:03:00.0"}) h.pciConfig(a, std::string(64, '\0'));
  for (const char* a : {"0000:00:1c.0", "0000:02:00.0"}) {  // FIFOs: refused
    ASSERT_EQ(::mkfifo((h.root() / "sys/bus/pci/devices" / a / "config").c_str(), 0600), 0);
  }
  auto facts = read(h);
  EXPECT_TRUE(facts.device("0000:02:00.1")->config);
  // Neither in a shared group nor above one: not read.
  EXPECT_FALSE(facts.device("0000:00:1d.0")->config);
  EXPECT_FALSE(facts.device("0000:03:00.0")->config);
  ASSERT_EQ(facts.unreadable.size(), 2U);
  EXPECT_EQ(facts.unreadable[0].path, (h.root() / "sys/bus/pci/devices/0000:00:1c.0/config").string());
  EXPECT_EQ(facts.unreadable[1].path, (h.root() / "sys/bus/pci/devices/0000:02:00.0/config").string());
  EXPECT_EQ(facts.unreadable[1].reason, "a FIFO, not a regular file: refused");
}

TEST(HostReader, ReadsEachVirtioChildAndItsAccessPlatformBit) {
  auto h = read(*iommud::testing::virtioGuest());
  const auto* on = h.device("0000:00:04.0");
  const auto* off = h.device("0000:00:05.0");
  ASSERT_TRUE(on && on->virtio && off && off->virtio);
  EXPECT_EQ(on->virtio->name, "virtio0");
  EXPECT_EQ(on->virtio->accessPlatform, true);
  EXPECT_EQ(off->virtio->name, "virtio1");
  EXPECT_EQ(off->virtio->accessPlatform, false);
  EXPECT_FALSE(h.device("0000:00:00.0")->virtio);
  EXPECT_EQ(h.confidential, Confidential::None);
}

TEST(HostReader, ReadsTheConfidentialGuestOnlyWhereAVirtioDeviceNeedsIt) {
  auto guest = iommud::testing::virtioGuest();
  guest->cpuFlags("fpu hypervisor sev sev_es sev_snp");
  EXPECT_EQ(read(*guest).confidential, Confidential::SevSnp);
  std::filesystem::remove(guest->root() / "proc/cpuinfo");
  EXPECT_EQ(read(*guest).confidential, Confidential::Unknown);
  auto bare = iommud::testing::intelBareMetal();
  bare->cpuFlags("fpu hypervisor tdx_guest");
  EXPECT_EQ(read(*bare).confidential, Confidential::None);  // no virtio device: not read
}
}  // namespace host_reader_test
