#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace iommud::testing {

/// Builds a synthetic host root in a temporary directory, laid out as the kernel lays out
/// /sys and /proc: real directories under /sys/devices, relative class and bus links, and the
/// attribute files iommud reads. Removed on destruction.
class FakeHost {
 public:
  explicit FakeHost(std::string release = "6.1.0-56-amd64");
  ~FakeHost();
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  [[nodiscard]] const std::filesystem::path& root() const { return root_; }
  [[nodiscard]] std::string rootString() const { return root_.string(); }

  // Kernel
  FakeHost& procVersion(const std::string& text);
  FakeHost& cmdline(const std::string& text);
  /// /proc/sys/kernel/arch (`uname -m`; kernels since 6.0 have it): "aarch64", "x86_64".
  FakeHost& machine(const std::string& name);
  /// Writes /boot/config-<release> with the given lines ("CONFIG_X=y", "# CONFIG_Y is not set").
  FakeHost& config(const std::vector<std::string>& lines);
  FakeHost& firmwareTable(const std::string& name, const std::string& bytes = "");
  /// Firmware without ACPI that describes the hardware in a device tree (arm64): no
  /// /sys/firmware/acpi, a /sys/firmware/devicetree/base with the root node's `compatible`.
  FakeHost& deviceTree(const std::string& compatible = "linux,dummy-virt");
  /// A PCI function's `config` file (its config space, as root reads it).
  FakeHost& pciConfig(const std::string& address, const std::string& bytes);

  // IOMMU units and groups
  FakeHost& intelUnit(const std::string& name, const std::string& cap, const std::string& ecap);
  FakeHost& amdUnit(const std::string& name, const std::string& cap, const std::string& features);
  FakeHost& otherUnit(const std::string& name);
  /// A group whose type file holds `type` verbatim (so "DMA" without newline is possible).
  FakeHost& group(int id, const std::string& type, const std::vector<std::string>& devices);

  struct Pci {
    std::string address;
    std::string parent;  // upstream bridge address, empty for the root bus
    uint16_t vendor = 0x8086;
    uint16_t device = 0x0001;
    uint32_t classCode = 0;
    std::optional<std::string> driver;
    std::optional<std::string> removable;  // "removable", "fixed"; nullopt: no file
    int sriovNumVfs = -1;                  // -1: no file
    uint16_t subVendor = 0;
    uint16_t subDevice = 0;
  };
  FakeHost& pci(const Pci& dev);
  /// A PCIe bridge (class 0x060400).
  FakeHost& bridge(const std::string& address, const std::string& parent = "", uint16_t vendor = 0x8086,
                   uint16_t device = 0x7a38);

  struct Net {
    std::string name;
    int ifindex = 2;
    bool up = true;
    std::string operstate = "up";
    std::string master;
  };
  FakeHost& netdev(const std::string& pciAddress, const Net& net);
  FakeHost& routes(const std::string& ipv4, const std::string& ipv6 = "");
  FakeHost& inet6(const std::string& text);

  /// An NVMe controller with namespaces; each namespace lists its partitions.
  struct Namespace {
    std::string name;                                             // "nvme0n1"
    std::string dev;                                              // "259:0"
    std::vector<std::pair<std::string, std::string>> partitions;  // ("nvme0n1p1", "259:1")
    std::vector<std::string> holders;
  };
  FakeHost& nvme(const std::string& pciAddress, const std::string& name, const std::string& model,
                 const std::string& serial, const std::vector<Namespace>& namespaces);
  /// A stacked block device (dm-0, md127) that holds others.
  FakeHost& stackedBlock(const std::string& name, const std::string& dev);
  /// Marks `holder` as holding block device `held` (a partition or a namespace).
  FakeHost& holds(const std::string& holder, const std::string& held);
  FakeHost& mountinfo(const std::string& text);
  FakeHost& swaps(const std::string& text);

  FakeHost& thunderboltDomain(const std::string& name, const std::string& security, std::optional<bool> dmaProtection);
  FakeHost& swiotlb(uint64_t nslabs, uint64_t used, uint64_t hiwater);
  /// A virtio-pci function (Red Hat's 1af4:1042, a virtio-blk, bound to virtio-pci) with its
  /// `name` child, bound to virtio_blk, whose `features` has VIRTIO_F_ACCESS_PLATFORM (bit 33) as given.
  FakeHost& virtio(const std::string& address, const std::string& name, bool accessPlatform);
  /// /proc/cpuinfo with one processor whose `flags` line is `flags`.
  FakeHost& cpuFlags(const std::string& flags);

  /// Writes a file below the root (parents created); throws when the file is read-only or cannot
  /// be written, whoever runs the test.
  void write(const std::string& path, const std::string& content);
  void symlink(const std::string& target, const std::string& linkPath);

 private:
  std::string devicePath(const std::string& address) const;  // "/sys/devices/pci0000:00/..."
  std::filesystem::path root_;
  std::string release_;
  std::vector<std::pair<std::string, std::string>> parents_;  // address -> parent address
};

}  // namespace iommud::testing
