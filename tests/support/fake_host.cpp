#include "support/fake_host.hpp"

#include <fmt/format.h>
#include <stdlib.h>  // NOLINT(modernize-deprecated-headers): mkdtemp

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace iommud::testing {

namespace fs = std::filesystem;

namespace {

// A relative link target from the link's directory to `target` (both absolute host paths), as
// sysfs makes them.
std::string relativeTarget(const std::string& linkPath, const std::string& target) {
  fs::path from = fs::path(linkPath).parent_path();
  return fs::path(target).lexically_relative(from).string();
}

}  // namespace

FakeHost::FakeHost(std::string release) : release_(std::move(release)) {
  std::string tmpl = (fs::temp_directory_path() / "iommud-host-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
  write("/proc/sys/kernel/osrelease", release_ + "\n");
  write("/proc/version", fmt::format("Linux version {} (debian-kernel@lists.debian.org) #1 SMP\n", release_));
  write("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=1234 ro quiet\n");
  fs::create_directories(root_ / "sys/kernel/iommu_groups");
  fs::create_directories(root_ / "sys/class/iommu");
  fs::create_directories(root_ / "sys/bus/pci/devices");
  fs::create_directories(root_ / "sys/class/net");
  fs::create_directories(root_ / "sys/class/block");
  fs::create_directories(root_ / "sys/firmware/acpi/tables");
}

FakeHost::~FakeHost() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

void FakeHost::write(const std::string& path, const std::string& content) {
  fs::path p = root_ / path.substr(1);
  fs::create_directories(p.parent_path());
  // A file made read-only (as sysfs shows some) is not written, whoever runs the test: root could,
  // and a test that relied on it would pass only as root.
  std::error_code ec;
  auto st = fs::status(p, ec);
  if (!ec && fs::exists(st) && (st.permissions() & fs::perms::owner_write) == fs::perms::none) {
    throw std::runtime_error("FakeHost::write: " + path + " is read-only; make it writable first if the test means to");
  }
  std::ofstream out(p, std::ios::binary);
  out << content;
  out.close();
  if (!out) throw std::runtime_error("FakeHost::write: cannot write " + path + ": " + std::strerror(errno));
}

void FakeHost::symlink(const std::string& target, const std::string& linkPath) {
  fs::path p = root_ / linkPath.substr(1);
  fs::create_directories(p.parent_path());
  fs::remove(p);
  fs::create_symlink(target, p);
}

FakeHost& FakeHost::procVersion(const std::string& text) {
  write("/proc/version", text + "\n");
  return *this;
}

FakeHost& FakeHost::machine(const std::string& name) {
  write("/proc/sys/kernel/arch", name + "\n");
  return *this;
}

FakeHost& FakeHost::cmdline(const std::string& text) {
  write("/proc/cmdline", text + "\n");
  return *this;
}

FakeHost& FakeHost::config(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  write("/boot/config-" + release_, text);
  return *this;
}

FakeHost& FakeHost::deviceTree(const std::string& compatible) {
  fs::remove_all(root_ / "sys/firmware/acpi");
  write("/sys/firmware/devicetree/base/compatible", compatible + std::string(1, '\0'));
  return *this;
}

FakeHost& FakeHost::firmwareTable(const std::string& name, const std::string& bytes) {
  write("/sys/firmware/acpi/tables/" + name, bytes);
  return *this;
}

FakeHost& FakeHost::intelUnit(const std::string& name, const std::string& cap, const std::string& ecap) {
  std::string dir = "/sys/devices/virtual/iommu/" + name;
  write(dir + "/intel-iommu/cap", cap + "\n");
  write(dir + "/intel-iommu/ecap", ecap + "\n");
  write(dir + "/intel-iommu/version", "1:0\n");
  symlink(relativeTarget("/sys/class/iommu/" + name, dir), "/sys/class/iommu/" + name);
  return *this;
}

FakeHost& FakeHost::amdUnit(const std::string& name, const std::string& cap, const std::string& features) {
  std::string dir = "/sys/devices/pci0000:00/0000:00:00.2/iommu/" + name;
  write(dir + "/amd-iommu/cap", cap + "\n");
  write(dir + "/amd-iommu/features", features + "\n");
  symlink(relativeTarget("/sys/class/iommu/" + name, dir), "/sys/class/iommu/" + name);
  return *this;
}

FakeHost& FakeHost::otherUnit(const std::string& name) {
  std::string dir = "/sys/devices/platform/iommu/" + name;
  fs::create_directories(root_ / dir.substr(1));
  symlink(relativeTarget("/sys/class/iommu/" + name, dir), "/sys/class/iommu/" + name);
  return *this;
}

FakeHost& FakeHost::group(int id, const std::string& type, const std::vector<std::string>& devices) {
  std::string dir = fmt::format("/sys/kernel/iommu_groups/{}", id);
  write(dir + "/type", type);
  fs::create_directories(root_ / (dir.substr(1) + "/devices"));
  for (const auto& d : devices) {
    std::string link = dir + "/devices/" + d;
    symlink(relativeTarget(link, devicePath(d)), link);
  }
  return *this;
}

std::string FakeHost::devicePath(const std::string& address) const {
  std::string path = address;
  std::string cur = address;
  for (int guard = 0; guard < 16; ++guard) {
    auto it = std::find_if(parents_.begin(), parents_.end(), [&](const auto& p) { return p.first == cur; });
    if (it == parents_.end() || it->second.empty()) break;
    path = it->second + "/" + path;
    cur = it->second;
  }
  return "/sys/devices/pci" + cur.substr(0, 7) + "/" + path;  // the root bus of the topmost bridge
}

FakeHost& FakeHost::pci(const Pci& d) {
  parents_.emplace_back(d.address, d.parent);
  std::string dir = devicePath(d.address);
  std::string uevent;
  if (d.driver) uevent += "DRIVER=" + *d.driver + "\n";
  uevent += fmt::format("PCI_CLASS={:X}\nPCI_ID={:04X}:{:04X}\nPCI_SUBSYS_ID={:04X}:{:04X}\nPCI_SLOT_NAME={}\n",
                        d.classCode, d.vendor, d.device, d.subVendor, d.subDevice, d.address);
  write(dir + "/uevent", uevent);
  write(dir + "/vendor", fmt::format("0x{:04x}\n", d.vendor));
  write(dir + "/device", fmt::format("0x{:04x}\n", d.device));
  write(dir + "/class", fmt::format("0x{:06x}\n", d.classCode));
  if (d.removable) write(dir + "/removable", *d.removable + "\n");
  if (d.sriovNumVfs >= 0) write(dir + "/sriov_numvfs", fmt::format("{}\n", d.sriovNumVfs));
  if (d.driver) symlink(relativeTarget(dir + "/driver", "/sys/bus/pci/drivers/" + *d.driver), dir + "/driver");
  std::string link = "/sys/bus/pci/devices/" + d.address;
  symlink(relativeTarget(link, dir), link);
  return *this;
}

FakeHost& FakeHost::pciConfig(const std::string& address, const std::string& bytes) {
  write(devicePath(address) + "/config", bytes);
  return *this;
}

FakeHost& FakeHost::bridge(const std::string& address, const std::string& parent, uint16_t vendor, uint16_t device) {
  return pci(Pci{address, parent, vendor, device, 0x060400, "pcieport", std::nullopt, -1, 0, 0});
}

FakeHost& FakeHost::netdev(const std::string& pciAddress, const Net& n) {
  std::string dir = devicePath(pciAddress) + "/net/" + n.name;
  write(dir + "/ifindex", fmt::format("{}\n", n.ifindex));
  write(dir + "/flags", n.up ? "0x1003\n" : "0x1002\n");
  write(dir + "/operstate", n.operstate + "\n");
  if (!n.master.empty()) {
    symlink(relativeTarget(dir + "/master", "/sys/devices/virtual/net/" + n.master), dir + "/master");
  }
  symlink(relativeTarget("/sys/class/net/" + n.name, dir), "/sys/class/net/" + n.name);
  return *this;
}

FakeHost& FakeHost::routes(const std::string& ipv4, const std::string& ipv6) {
  write("/proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" + ipv4);
  write("/proc/net/ipv6_route", ipv6);
  return *this;
}

FakeHost& FakeHost::inet6(const std::string& text) {
  write("/proc/net/if_inet6", text);
  return *this;
}

FakeHost& FakeHost::nvme(const std::string& pciAddress, const std::string& name, const std::string& model,
                         const std::string& serial, const std::vector<Namespace>& namespaces) {
  std::string ctrl = devicePath(pciAddress) + "/nvme/" + name;
  write(ctrl + "/model", model + "\n");
  write(ctrl + "/serial", serial + "\n");
  write(ctrl + "/address", pciAddress + "\n");
  symlink(relativeTarget("/sys/class/nvme/" + name, ctrl), "/sys/class/nvme/" + name);
  for (const auto& ns : namespaces) {
    std::string nsDir = ctrl + "/" + ns.name;
    write(nsDir + "/dev", ns.dev + "\n");
    fs::create_directories(root_ / (nsDir.substr(1) + "/holders"));
    symlink(relativeTarget("/sys/class/block/" + ns.name, nsDir), "/sys/class/block/" + ns.name);
    for (const auto& [part, dev] : ns.partitions) {
      std::string pDir = nsDir + "/" + part;
      write(pDir + "/dev", dev + "\n");
      fs::create_directories(root_ / (pDir.substr(1) + "/holders"));
      symlink(relativeTarget("/sys/class/block/" + part, pDir), "/sys/class/block/" + part);
    }
  }
  return *this;
}

FakeHost& FakeHost::stackedBlock(const std::string& name, const std::string& dev) {
  std::string dir = "/sys/devices/virtual/block/" + name;
  write(dir + "/dev", dev + "\n");
  fs::create_directories(root_ / (dir.substr(1) + "/holders"));
  symlink(relativeTarget("/sys/class/block/" + name, dir), "/sys/class/block/" + name);
  return *this;
}

FakeHost& FakeHost::holds(const std::string& holder, const std::string& held) {
  // The kernel links both ways: held/holders/HOLDER and holder/slaves/HELD.
  auto hostDir = [&](const std::string& name) {
    return "/" + fs::canonical(root_ / ("sys/class/block/" + name)).lexically_relative(root_).string();
  };
  std::string heldDir = hostDir(held);
  std::string holderDir = hostDir(holder);
  symlink(relativeTarget(heldDir + "/holders/" + holder, holderDir), heldDir + "/holders/" + holder);
  symlink(relativeTarget(holderDir + "/slaves/" + held, heldDir), holderDir + "/slaves/" + held);
  return *this;
}

FakeHost& FakeHost::mountinfo(const std::string& text) {
  write("/proc/self/mountinfo", text);
  return *this;
}

FakeHost& FakeHost::swaps(const std::string& text) {
  write("/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n" + text);
  return *this;
}

FakeHost& FakeHost::thunderboltDomain(const std::string& name, const std::string& security,
                                      std::optional<bool> dmaProtection) {
  std::string dir = "/sys/devices/pci0000:00/0000:00:0d.2/" + name;
  write(dir + "/security", security + "\n");
  if (dmaProtection) write(dir + "/iommu_dma_protection", *dmaProtection ? "1\n" : "0\n");
  std::string link = "/sys/bus/thunderbolt/devices/" + name;
  symlink(relativeTarget(link, dir), link);
  return *this;
}

FakeHost& FakeHost::swiotlb(uint64_t nslabs, uint64_t used, uint64_t hiwater) {
  write("/sys/kernel/debug/swiotlb/io_tlb_nslabs", fmt::format("{}\n", nslabs));
  write("/sys/kernel/debug/swiotlb/io_tlb_used", fmt::format("{}\n", used));
  write("/sys/kernel/debug/swiotlb/io_tlb_used_hiwater", fmt::format("{}\n", hiwater));
  return *this;
}

FakeHost& FakeHost::virtio(const std::string& address, const std::string& name, bool accessPlatform) {
  pci({.address = address, .vendor = 0x1af4, .device = 0x1042, .classCode = 0x010000, .driver = "virtio-pci"});
  // features_show() prints one digit per bit, bit 0 first: VERSION_1 (32) and bit 33 as asked.
  std::string bits(64, '0');
  bits[32] = '1';
  bits[33] = accessPlatform ? '1' : '0';
  std::string child = devicePath(address) + "/" + name;
  write(child + "/features", bits + "\n");
  symlink(relativeTarget(child + "/driver", "/sys/bus/virtio/drivers/virtio_blk"), child + "/driver");
  return *this;
}

FakeHost& FakeHost::cpuFlags(const std::string& flags) {
  write("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: " + flags + "\n\n");
  return *this;
}

}  // namespace iommud::testing
