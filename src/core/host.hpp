#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/acpi_tables.hpp"
#include "core/arch.hpp"
#include "core/caps.hpp"
#include "core/cmdline.hpp"
#include "core/kernel_version.hpp"
#include "core/names.hpp"
#include "core/pci_config.hpp"

namespace iommud::core {

/// Who made the IOMMU, as told by the name of its /sys/class/iommu entry.
enum class Vendor { None, Intel, Amd, ArmSmmu, ArmSmmuV3, Virtio, Unknown };
inline constexpr Names<Vendor, 7> kVendorNames{{{Vendor::None, "none"},
                                                {Vendor::Intel, "intel"},
                                                {Vendor::Amd, "amd"},
                                                {Vendor::ArmSmmu, "arm-smmu"},
                                                {Vendor::ArmSmmuV3, "arm-smmu-v3"},
                                                {Vendor::Virtio, "virtio"},
                                                {Vendor::Unknown, "unknown"}}};
static_assert(checkNames(kVendorNames, Vendor::Unknown));
std::string_view toString(Vendor vendor);
/// "dmar0" -> Intel, "ivhd0" -> Amd, "smmu3.0x..." -> ArmSmmuV3, "smmu.0x..." -> ArmSmmu, "virtio0" -> Virtio.
Vendor vendorFromUnitName(std::string_view name);
/// A person's name for the vendor: "Intel VT-d", "AMD-Vi", ...
std::string_view displayName(Vendor vendor);

/// The default domain of an IOMMU group, as /sys/kernel/iommu_groups/N/type reads.
enum class DomainType { Dma, DmaFq, Identity, Blocked, Unmanaged, Unknown };
inline constexpr Names<DomainType, 6> kDomainTypeNames{{{DomainType::Dma, "DMA"},
                                                        {DomainType::DmaFq, "DMA-FQ"},
                                                        {DomainType::Identity, "identity"},
                                                        {DomainType::Blocked, "blocked"},
                                                        {DomainType::Unmanaged, "unmanaged"},
                                                        {DomainType::Unknown, "unknown"}}};
static_assert(checkNames(kDomainTypeNames, DomainType::Unknown));
std::string_view toString(DomainType type);  // the kernel's spelling: "DMA", "DMA-FQ", ...
/// Parses a `type` file; tolerates the missing newline of kernels before 5.3.
std::optional<DomainType> parseDomainType(std::string_view text);
inline bool isTranslated(DomainType t) {
  return t == DomainType::Dma || t == DomainType::DmaFq;
}

/// One hardware IOMMU (a /sys/class/iommu entry).
struct IommuUnit {
  std::string name;
  Vendor vendor = Vendor::Unknown;
  std::string version;  // Intel `version`, e.g. "1:0"
  std::optional<IntelCaps> intel;
  std::optional<AmdCaps> amd;
};

/// One IOMMU group and its member devices (PCI addresses or other device names).
struct Group {
  int id = 0;
  std::optional<DomainType> type;  // nullopt when `type` could not be read or parsed
  std::string typeText;            // as read, trimmed
  std::vector<std::string> devices;
};

/// A NIC's ethtool settings: current values and maxima by ethtool name ("rx", "combined",
/// "rx-usecs"). Read over netlink on the live host; `read` is false where nobody could read them.
struct EthtoolState {
  bool read = false;
  std::map<std::string, uint32_t> rings, ringsMax;
  std::map<std::string, uint32_t> channels, channelsMax;
  std::map<std::string, uint32_t> coalesce;
};

/// A network interface backed by a PCI function.
struct NetDev {
  std::string name;
  int ifindex = 0;
  bool up = false;  // IFF_UP in `flags`
  std::string operstate;
  std::string mac;                // `address`, as the kernel prints it; internal, not in status JSON
  std::string master;             // bond or bridge it is enslaved to, if any
  bool hasGlobalAddress = false;  // an IPv6 address other than link-local
  bool hasRoute = false;          // an IPv4 or IPv6 route through it
  EthtoolState ethtool;
};

/// A block device (namespace or partition) and what holds it.
struct BlockDev {
  std::string name;                  // "nvme0n1", "nvme0n1p2"
  std::string devNum;                // "259:0"
  std::vector<std::string> holders;  // "dm-0", "md127"
};

struct NvmeNamespace {
  BlockDev disk;
  std::vector<BlockDev> partitions;
};

struct NvmeController {
  std::string name;  // "nvme0"
  std::string model;
  std::string serial;
  std::vector<NvmeNamespace> namespaces;
};

/// Why a device cannot be unbound without harm.
struct InUseReason {
  enum class Kind { Mounted, Swap, Held, RootDevice, NetAddress, NetRoute, NetMaster, Vfio, SriovVfs };
  Kind kind;
  std::string detail;  // "nvme0n1p2 is mounted at /home"

  bool operator==(const InUseReason&) const = default;
};
inline constexpr Names<InUseReason::Kind, 9> kInUseReasonKindNames{{{InUseReason::Kind::Mounted, "mounted"},
                                                                    {InUseReason::Kind::Swap, "swap"},
                                                                    {InUseReason::Kind::Held, "held"},
                                                                    {InUseReason::Kind::RootDevice, "root-device"},
                                                                    {InUseReason::Kind::NetAddress, "net-address"},
                                                                    {InUseReason::Kind::NetRoute, "net-route"},
                                                                    {InUseReason::Kind::NetMaster, "net-enslaved"},
                                                                    {InUseReason::Kind::Vfio, "vfio"},
                                                                    {InUseReason::Kind::SriovVfs, "sriov-vfs"}}};
static_assert(checkNames(kInUseReasonKindNames, InUseReason::Kind::SriovVfs));
std::string_view toString(InUseReason::Kind kind);

/// "removable" attribute of a PCI device (5.14+): the kernel's external-facing verdict.
enum class Removable { Unknown, Removable, Fixed, Absent };
inline constexpr Names<Removable, 4> kRemovableNames{{{Removable::Unknown, "unknown"},
                                                      {Removable::Removable, "removable"},
                                                      {Removable::Fixed, "fixed"},
                                                      {Removable::Absent, "absent"}}};
static_assert(checkNames(kRemovableNames, Removable::Absent));
std::string_view toString(Removable r);

/// What a device is, for people and for policies.
enum class DeviceKind { Nic, Nvme, Bridge, Other };
inline constexpr Names<DeviceKind, 4> kDeviceKindNames{{{DeviceKind::Nic, "nic"},
                                                        {DeviceKind::Nvme, "nvme"},
                                                        {DeviceKind::Bridge, "bridge"},
                                                        {DeviceKind::Other, "other"}}};
static_assert(checkNames(kDeviceKindNames, DeviceKind::Other));
std::string_view toString(DeviceKind kind);

/// The virtio device a PCI function carries once virtio-pci binds it: its `virtioN` child.
struct VirtioChild {
  std::string name;                    // "virtio0"
  std::optional<bool> accessPlatform;  // VIRTIO_F_ACCESS_PLATFORM (features bit 33); nullopt: unread
};

/// One PCI function.
struct PciDevice {
  std::string address;  // "0000:01:00.0"
  uint16_t vendorId = 0;
  uint16_t deviceId = 0;
  uint16_t subsystemVendorId = 0;
  uint16_t subsystemDeviceId = 0;
  uint32_t classCode = 0;  // 0x010802
  std::optional<std::string> driver;
  std::string driverModule;  // the module behind the driver (its `module` link), else the driver's name
  std::optional<int> group;
  Removable removable = Removable::Absent;
  std::vector<std::string> bridges;  // upstream PCI bridges, root port first
  bool thunderbolt = false;          // behind a Thunderbolt/USB4 tunnel
  std::string thunderboltWhy;
  int sriovNumVfs = 0;
  std::vector<NetDev> netdevs;
  std::vector<NvmeController> nvme;
  std::vector<InUseReason> inUse;  // filled by assessUse()
  /// Its config space, read only for the members of shared groups and their bridges (to say why
  /// they share one); 64 bytes without root.
  std::optional<PciConfig> config;
  std::optional<VirtioChild> virtio;

  [[nodiscard]] DeviceKind kind() const;
  /// A virtio device without VIRTIO_F_ACCESS_PLATFORM: its driver hands the device physical
  /// addresses without the DMA API, so no IOMMU maps for it (docs/kernel.md §4.3).
  [[nodiscard]] bool bypassesDmaApi() const { return virtio && virtio->accessPlatform == false; }
  /// The kernel treats devices below an external-facing port as untrusted; `removable` is the
  /// only trace of that in sysfs.
  [[nodiscard]] bool untrusted() const { return removable == Removable::Removable || thunderbolt; }
  /// A friendly name: the first netdev or NVMe controller, else the address.
  [[nodiscard]] std::string displayName() const;
  /// What stays the same when the device is unplugged and plugged in again, perhaps at another
  /// address: its ids and, where it has one, the serial of its NVMe controller or the MAC of its
  /// interface ("1d6a:00b1/1d6a:0001 mac 00:17:b6:00:00:01").
  [[nodiscard]] std::string identity() const;
};

/// Whether a path component is a PCI function address, "0000:05:00.0".
bool isPciAddress(std::string_view s);
/// The PCI function a sysfs path (or udev devpath) belongs to: its last PCI address component;
/// "" when there is none (virtual devices).
std::string pciFunctionOf(std::string_view path);

struct ThunderboltDomain {
  std::string name;      // "domain0"
  std::string security;  // none, user, secure, dponly, usbonly, nopcie
  std::optional<bool> iommuDmaProtection;
};

/// One line of /proc/self/mountinfo that matters: which device is mounted where.
struct Mount {
  std::string devNum;  // "259:2"
  std::string mountPoint;
  std::string source;  // "/dev/nvme0n1p2"
  std::string fsType;
};

/// swiotlb pool usage from debugfs; all nullopt when debugfs is not readable.
struct Swiotlb {
  std::optional<uint64_t> nslabs;
  std::optional<uint64_t> used;
  std::optional<uint64_t> usedHiwater;
};

/// The running kernel's initramfs and the modules in it. A module loaded from the image reads the
/// image's own copy of modprobe.d, so a modprobe.d change reaches boot only once the image is
/// rebuilt. Listing an image decompresses tens of MB: it is read only for a plan that writes
/// modprobe.d, never for `status`.
struct Initramfs {
  enum class State {
    NotRead,     // nobody looked (the default)
    Absent,      // no image for this release (under --root as on a host that boots without one)
    Listed,      // `modules` is what it holds
    Unreadable,  // it exists and could not be listed: `reason`
  };
  /// Who builds it, told by its name: Debian's update-initramfs (initramfs-tools, and Debian's
  /// dracut behind the same command) writes initrd.img-<release>, Fedora's dracut initramfs-<release>.img.
  enum class Generator { UpdateInitramfs, Dracut };
  State state = State::NotRead;
  Generator generator = Generator::UpdateInitramfs;
  std::string image;              // "/boot/initrd.img-6.1.0-18-amd64", as the host sees it
  std::set<std::string> modules;  // as the kernel names them: '_', never '-'
  std::string reason;
};

struct KernelInfo {
  std::string release;      // /proc/sys/kernel/osrelease
  std::string procVersion;  // /proc/version
  UpstreamVersion upstream;
  std::string machine;        // /proc/sys/kernel/arch (`uname -m`, 6.0+), "" when absent
  Arch arch = Arch::Unknown;  // deriveArch(): decides what iommuCmdline reads (docs/kernel.md §1.5)
  std::string cmdline;
  IommuCmdline iommuCmdline;                  // read for `arch`
  std::map<std::string, std::string> config;  // IOMMU-related CONFIG_ symbols; "n" for "is not set"
  std::string configSource;                   // path it came from, empty if none was readable
  Initramfs initramfs;
};

/// What firmware tables say about DMA remapping hardware.
struct Firmware {
  bool acpi = false;                      // /sys/firmware/acpi/tables exists: the firmware speaks ACPI
  bool deviceTree = false;                // /sys/firmware/devicetree exists (arm64 without ACPI)
  std::vector<std::string> tables;        // present of DMAR, IVRS, IORT, VIOT
  std::optional<bool> dmarPlatformOptIn;  // DMAR flags bit 2, when the table is readable
  std::optional<DmarInfo> dmar;           // when the table is readable (root)
  std::optional<IvrsInfo> ivrs;           // likewise
};

/// The kind of confidential guest the kernel runs as, whose memory the hypervisor cannot read
/// (docs/kernel.md §4.3).
enum class Confidential { None, Sev, SevEs, SevSnp, Tdx, Unknown };
inline constexpr Names<Confidential, 6> kConfidentialNames{{{Confidential::None, "none"},
                                                            {Confidential::Sev, "sev"},
                                                            {Confidential::SevEs, "sev-es"},
                                                            {Confidential::SevSnp, "sev-snp"},
                                                            {Confidential::Tdx, "tdx"},
                                                            {Confidential::Unknown, "unknown"}}};
static_assert(checkNames(kConfidentialNames, Confidential::Unknown));
/// "none", "sev", "sev-es", "sev-snp", "tdx", "unknown".
std::string_view toString(Confidential kind);

/// One parameter in /sys/module/<module>/parameters.
struct ModuleParam {
  std::string value;      // trimmed
  bool writable = false;  // a write bit in the file's mode: settable at runtime
};

/// A kernel module as /sys/module shows it, and what iommud's own modprobe.d file sets for it.
struct Module {
  std::string name;
  bool loaded = false;   // /sys/module/<name> exists (built-in modules with parameters too)
  bool builtin = false;  // no `initstate`: cannot be reloaded, load-time options need the command line
  std::map<std::string, ModuleParam> params;
  std::map<std::string, std::string> iommudOptions;  // "options" in /etc/modprobe.d/iommud-<name>.conf
};

/// A file that exists but could not be read (usually: not root).
struct Unreadable {
  std::string path;
  std::string reason;
};

/// Everything iommud knows about the host: the input of every decision.
struct HostFacts {
  KernelInfo kernel;
  Firmware firmware;
  std::vector<IommuUnit> units;
  std::vector<Group> groups;
  std::vector<PciDevice> devices;  // sorted by address
  std::vector<ThunderboltDomain> thunderbolt;
  std::vector<Mount> mounts;
  std::vector<std::string> swaps;                // device names ("nvme0n1p3") used as swap
  std::map<std::string, BlockDev> stackedBlock;  // dm/md devices that hold NVMe ones, by name
  Swiotlb swiotlb;
  std::map<std::string, Module> modules;  // the drivers' modules and those policies name
  std::vector<Unreadable> unreadable;
  /// The distinct names of the interrupt chips (/sys/kernel/irq/*/chip_name), read on arm64 only:
  /// "ITS-MSI" (6.1) or "ITS-PCI-MSIX-<device>" (MSI parents) is an ITS (docs/kernel.md §4.2).
  std::set<std::string> irqChips;
  /// Read on x86 only when a virtio device exists (it decides how grave its bypass is); None elsewhere.
  Confidential confidential = Confidential::None;

  [[nodiscard]] const PciDevice* device(std::string_view address) const;
  [[nodiscard]] PciDevice* device(std::string_view address);
  [[nodiscard]] const Group* group(int id) const;
  /// A device and the rest of its IOMMU group, in the group's order (bridges included): what a
  /// domain type, which is the group's, acts on. Just `address` when it has no group or is unknown.
  [[nodiscard]] std::vector<std::string> withGroup(const std::string& address) const;
  [[nodiscard]] bool iommuPresent() const { return !units.empty() || !groups.empty(); }
  /// The vendor of the units; Unknown when they disagree or groups exist without units.
  [[nodiscard]] Vendor vendor() const;
};

/// The running kernel's architecture (docs/kernel.md §1.5): its machine name where the kernel
/// tells it (6.0+), else the IOMMU hardware and firmware tables, which belong to one architecture
/// each (DMAR, IVRS, VT-d and AMD-Vi units: x86; IORT and Arm SMMUs: arm64); else Unknown.
Arch deriveArch(const HostFacts& host);

/// The config symbol that turns VT-d on by default: CONFIG_INTEL_IOMMU_DEFAULT_ON, or Debian's and
/// Ubuntu's CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF (on, except for the integrated GPU). Empty
/// when VT-d is off by default or the config is not known.
std::string intelDefaultOnSymbol(const KernelInfo& kernel);

/// Marks devices behind a Thunderbolt/USB4 tunnel (docs/kernel.md §5, §9). sysfs has no direct
/// flag, so the evidence is: an Intel Thunderbolt bridge upstream of the device, or a
/// `removable` device on a host that has a Thunderbolt/USB4 domain.
void detectTunnels(HostFacts& host);

/// Fills every device's inUse reasons from mounts, swaps, holders, netdevs, driver and VFs.
void assessUse(HostFacts& host);

}  // namespace iommud::core
