#include "adapters/sysfs/host_reader.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "core/procfs.hpp"
#include "core/text.hpp"

namespace iommud::adapters::sysfs {
namespace {

using namespace core;  // NOLINT(google-build-using-namespace): this file fills the core model

// The routing tables are the one file that grows with the host's job: a router holding a full
// Internet table has a million IPv4 routes, 128 bytes a line in /proc/net/route.
constexpr size_t kRouteReadLimit = size_t{512} << 20U;
// Red Hat's PCI vendor id, which every virtio-pci function carries.
constexpr uint16_t kVirtioVendor = 0x1af4;
constexpr size_t kAccessPlatformBit = 33;

class Reader {
 public:
  explicit Reader(const Root& root, BootFacts* boot = nullptr) : root_(&root), boot_(boot) {}

  Result<HostFacts> run() {
    auto release = root_->readFile("/proc/sys/kernel/osrelease");
    if (!release) {
      return Error{release.error().code, release.error().path,
                   release.error().message + " (is " + displayRoot() + " a host root or an unpacked snapshot?)"};
    }
    host_.kernel.release = std::string(trim(*release));
    readBootFacts();
    readUnits();
    // What the command line says depends on the architecture, told by the units and tables too.
    host_.kernel.arch = deriveArch(host_);
    host_.kernel.iommuCmdline = interpretIommuCmdline(parseCmdline(host_.kernel.cmdline), host_.kernel.arch);
    readGroups();
    if (auto r = readPci(); !r) return r.error();
    readBridgeConfigs();
    readNetdevs();
    readNvme();
    readThunderbolt();
    readSwiotlb();
    if (host_.kernel.arch == Arch::Arm64) readIrqChips();
    readConfidential();
    for (const auto& d : host_.devices) {
      if (!d.driverModule.empty() && !host_.modules.contains(d.driverModule)) {
        host_.modules.emplace(d.driverModule, readModule(*root_, d.driverModule));
      }
    }
    detectTunnels(host_);
    assessUse(host_);
    return std::move(host_);
  }

  // `planned` with group `id` read again (see rereadGroup).
  HostFacts rereadGroup(HostFacts planned, int id) {
    host_ = std::move(planned);
    auto& groups = host_.groups;
    auto at = std::find_if(groups.begin(), groups.end(), [id](const Group& g) { return g.id == id; });
    if (!root_->listDir("/sys/kernel/iommu_groups/" + std::to_string(id)).ok()) {
      if (at != groups.end()) groups.erase(at);  // gone with its devices
      return std::move(host_);
    }
    Group fresh = readGroup(id);
    for (const auto& addr : fresh.devices) {
      if (!root_->readLink("/sys/bus/pci/devices/" + addr).ok()) continue;  // not PCI, or just removed
      PciDevice now = readPciDevice(addr);
      now.group = id;
      if (PciDevice* was = host_.device(addr)) {
        // What the group read does not cover (netdevs, NVMe, config space) stays as planned.
        was->bridges = std::move(now.bridges);
        was->driver = std::move(now.driver);
        was->driverModule = std::move(now.driverModule);
        was->removable = now.removable;
        was->sriovNumVfs = now.sriovNumVfs;
        was->virtio = std::move(now.virtio);
        was->group = id;
      } else {
        auto pos = std::lower_bound(host_.devices.begin(), host_.devices.end(), addr,
                                    [](const PciDevice& d, const std::string& a) { return d.address < a; });
        host_.devices.insert(pos, std::move(now));
      }
    }
    if (at != groups.end()) {
      *at = std::move(fresh);
    } else {
      groups.insert(std::lower_bound(groups.begin(), groups.end(), id, [](const Group& g, int i) { return g.id < i; }),
                    std::move(fresh));
    }
    detectTunnels(host_);
    assessUse(host_);
    return std::move(host_);
  }

 private:
  std::string displayRoot() const { return root_->isLive() ? "/" : root_->prefix(); }

  // An optional file: absent is normal, unreadable (or refused as unsafe to read) is reported.
  std::optional<std::string> optional(std::string_view path, size_t limit = kReadLimit) {
    auto r = root_->readFile(path, limit);
    if (r) return std::move(r).value();
    noteUnreadable(r.error());
    return std::nullopt;
  }
  std::optional<std::vector<std::string>> optionalDir(std::string_view path) {
    auto r = root_->listDir(path);
    if (r) return std::move(r).value();
    noteUnreadable(r.error());
    return std::nullopt;
  }
  void noteUnreadable(const Error& e) {
    if (e.code == EACCES || isRefusal(e)) host_.unreadable.push_back({e.path, e.message});
  }

  // The kernel's facts and the firmware's, from `boot_` when it holds them for this release; a
  // part is kept there only when it was read whole (nothing unreadable), so that what it gives
  // is what a read would.
  void readBootFacts() {
    if (boot_ != nullptr && boot_->release != host_.kernel.release) *boot_ = BootFacts{host_.kernel.release, {}, {}};
    readOrKeep(&BootFacts::kernel, host_.kernel, [this] { readKernel(); });
    readOrKeep(&BootFacts::firmware, host_.firmware, [this] { readFirmware(); });
  }

  template <class Part, class Read>
  void readOrKeep(std::optional<Part> BootFacts::*kept, Part& part, const Read& read) {
    if (boot_ != nullptr && boot_->*kept) {
      part = *(boot_->*kept);
      return;
    }
    const size_t unreadable = host_.unreadable.size();
    read();
    if (boot_ != nullptr && host_.unreadable.size() == unreadable) boot_->*kept = part;
  }

  void readKernel() {
    auto& k = host_.kernel;
    k.procVersion = std::string(trim(optional("/proc/version").value_or("")));
    auto signature = optional("/proc/version_signature").value_or("");
    k.upstream = upstreamVersion(k.release, k.procVersion, signature);
    k.cmdline = std::string(trim(optional("/proc/cmdline").value_or("")));
    k.machine = std::string(trim(optional("/proc/sys/kernel/arch").value_or("")));

    std::string bootConfig = "/boot/config-" + k.release;
    if (auto plain = optional(bootConfig)) {
      k.config = parseKconfig(*plain, isIommuConfigSymbol);
      k.configSource = bootConfig;
    } else if (auto gz = optional("/proc/config.gz")) {
      if (auto text = gunzip(*gz)) {
        k.config = parseKconfig(*text, isIommuConfigSymbol);
        k.configSource = "/proc/config.gz";
      } else {
        host_.unreadable.push_back({root_->hostPath("/proc/config.gz"), text.error().message});
      }
    }
  }

  void readFirmware() {
    // An arm64 host boots with ACPI (IORT) or a device tree; /sys/firmware says which.
    if (auto fw = optionalDir("/sys/firmware")) {
      host_.firmware.deviceTree = std::find(fw->begin(), fw->end(), "devicetree") != fw->end();
    }
    auto tables = optionalDir("/sys/firmware/acpi/tables");
    if (!tables) return;
    host_.firmware.acpi = true;
    for (const auto& t : *tables) {
      if (t == "DMAR" || t == "IVRS" || t == "IORT" || t == "VIOT") host_.firmware.tables.push_back(t);
    }
    auto has = [&](std::string_view t) { return std::find(tables->begin(), tables->end(), t) != tables->end(); };
    // The tables are root-only; without them their flags stay unknown (docs/kernel.md §11.1, §11.2).
    if (has("DMAR")) {
      if (auto bytes = optional("/sys/firmware/acpi/tables/DMAR")) {
        host_.firmware.dmar = parseDmar(*bytes);
        if (host_.firmware.dmar) host_.firmware.dmarPlatformOptIn = host_.firmware.dmar->platformOptIn();
      }
    }
    if (has("IVRS")) {
      if (auto bytes = optional("/sys/firmware/acpi/tables/IVRS")) host_.firmware.ivrs = parseIvrs(*bytes);
    }
  }

  // Why devices share a group is told by ACS on their paths (docs/kernel.md §11.3): the config
  // space of each member of a shared group (read with the device, see readPci) and of the bridges
  // above them, read once each.
  void readBridgeConfigs() {
    std::set<std::string> bridges;
    for (const auto& g : host_.groups) {
      if (g.devices.size() < 2) continue;
      for (const auto& a : g.devices) {
        if (const auto* d = host_.device(a)) bridges.insert(d->bridges.begin(), d->bridges.end());
      }
    }
    for (const auto& a : bridges) {
      auto* d = host_.device(a);
      if (d == nullptr || inSharedGroup(*d)) continue;  // absent, or read with its group
      readConfig(*d, "/sys/bus/pci/devices/" + a + "/config");
    }
    for (auto& [address, note] : configNotes_) host_.unreadable.push_back(std::move(note));
  }

  // A device's config space from `path`; what makes it unreadable is noted under the device's link,
  // the notes in the order of the addresses (readBridgeConfigs adds them), wherever it was read.
  void readConfig(PciDevice& d, const std::string& path) {
    auto bytes = root_->readFile(path);
    if (bytes) {
      d.config = parsePciConfig(*bytes);
    } else if (const Error& e = bytes.error(); e.code == EACCES || isRefusal(e)) {
      configNotes_.emplace(d.address,
                           Unreadable{root_->hostPath("/sys/bus/pci/devices/" + d.address + "/config"), e.message});
    }
  }

  bool inSharedGroup(const PciDevice& d) const {
    const Group* g = d.group ? host_.group(*d.group) : nullptr;
    return g != nullptr && g->devices.size() >= 2;
  }

  void readUnits() {
    const HeldDir classDir(*this, "/sys/class/iommu");  // listed, and each unit's link read, from there
    auto names = optionalDir("/sys/class/iommu");
    if (!names) return;
    for (const auto& name : *names) {
      IommuUnit u;
      u.name = name;
      u.vendor = vendorFromUnitName(name);
      std::string base = "/sys/class/iommu/" + name;
      // Record the class link so a snapshot can store the unit's files where they live.
      if (auto target = root_->readLink(base)) base = resolveLink(base, *target);
      if (u.vendor == Vendor::Intel) {
        auto cap = optional(base + "/intel-iommu/cap");
        auto ecap = optional(base + "/intel-iommu/ecap");
        u.version = std::string(trim(optional(base + "/intel-iommu/version").value_or("")));
        if (cap && ecap) {
          auto c = parseHex64(*cap);
          auto e = parseHex64(*ecap);
          if (c && e) u.intel = IntelCaps{*c, *e};
        }
      } else if (u.vendor == Vendor::Amd) {
        auto cap = optional(base + "/amd-iommu/cap");
        auto features = optional(base + "/amd-iommu/features");
        if (cap && features) {
          auto c = parseHex64(*cap);
          auto f = parseAmdFeatures(*features);
          if (c && f) u.amd = AmdCaps{static_cast<uint32_t>(*c), f->efr, f->efr2};
        }
      }
      host_.units.push_back(std::move(u));
    }
  }

  void readGroups() {
    // The directory exists even without an IOMMU (iommu_init() creates the kset): empty means
    // nothing is translated.
    auto ids = optionalDir("/sys/kernel/iommu_groups");
    if (!ids) return;
    for (const auto& idText : *ids) {
      char* end = nullptr;
      long id = std::strtol(idText.c_str(), &end, 10);
      if (end == idText.c_str() || *end != '\0') continue;
      host_.groups.push_back(readGroup(static_cast<int>(id)));
    }
    std::sort(host_.groups.begin(), host_.groups.end(), [](const Group& a, const Group& b) { return a.id < b.id; });
  }

  Group readGroup(int id) {
    Group g;
    g.id = id;
    std::string base = "/sys/kernel/iommu_groups/" + std::to_string(id);
    if (auto t = optional(base + "/type")) {
      g.typeText = std::string(trim(*t));
      g.type = parseDomainType(g.typeText);
    }
    g.devices = optionalDir(base + "/devices").value_or(std::vector<std::string>{});
    return g;
  }

  static uint16_t hex16(std::string_view s) { return static_cast<uint16_t>(parseHex64(s).value_or(0)); }

  Result<bool> readPci() {
    const HeldDir held(*this, "/sys/bus/pci/devices");  // listed, and each device's link read, from there
    auto addresses = root_->listDir("/sys/bus/pci/devices");
    if (!addresses) {
      // No PCI bus (some Arm boards) is a host without PCI devices, not a failure.
      if (addresses.error().code == ENOENT && root_->listDir("/sys").ok()) return true;
      return addresses.error();
    }
    std::unordered_map<std::string, const Group*> groupOf;
    for (const auto& g : host_.groups) {
      for (const auto& d : g.devices) groupOf[d] = &g;
    }
    host_.devices.reserve(addresses->size());
    for (const auto& addr : *addresses) {
      auto it = groupOf.find(addr);
      const Group* g = it != groupOf.end() ? it->second : nullptr;
      // A member of a shared group has its config space read with it (see readBridgeConfigs).
      PciDevice d = readPciDevice(addr, g != nullptr && g->devices.size() >= 2);
      if (g != nullptr) d.group = g->id;
      host_.devices.push_back(std::move(d));
    }
    return true;
  }

  // ".../pci0000:00/0000:00:1c.0/0000:02:00.0": the components between the host bridge and the
  // device itself are its upstream bridges.
  static std::vector<std::string> bridgesOnPath(std::string_view path, std::string_view addr) {
    std::vector<std::string> bridges;
    for (auto part : split(path, '/')) {
      if (part.size() == 12 && part[4] == ':' && part[7] == ':' && part[10] == '.' && part != addr) {
        bridges.emplace_back(part);
      }
    }
    return bridges;
  }

  // A PCI function's uevent: its driver, class and the vendor and device ids, its own and its subsystem's.
  static void readUevent(PciDevice& d, std::string_view text) {
    for (auto line : split(text, '\n')) {
      auto eq = line.find('=');
      if (eq == std::string_view::npos) continue;
      auto key = line.substr(0, eq);
      auto value = line.substr(eq + 1);
      auto colon = value.find(':');
      if (key == "DRIVER") {
        d.driver = std::string(value);
      } else if (key == "PCI_CLASS") {
        d.classCode = static_cast<uint32_t>(parseHex64(value).value_or(0));
      } else if ((key == "PCI_ID" || key == "PCI_SUBSYS_ID") && colon != std::string_view::npos) {
        auto& vendor = key == "PCI_ID" ? d.vendorId : d.subsystemVendorId;
        auto& device = key == "PCI_ID" ? d.deviceId : d.subsystemDeviceId;
        vendor = hex16(value.substr(0, colon));
        device = hex16(value.substr(colon + 1));
      }
    }
  }

  // One PCI function: its bridges, driver, ids and class, trust and SR-IOV state, and its config
  // space when `withConfig` (from its directory, held).
  PciDevice readPciDevice(const std::string& addr, bool withConfig = false) {
    PciDevice d;
    d.address = addr;
    std::string link = "/sys/bus/pci/devices/" + addr;
    std::string base = link;
    if (auto target = root_->readLink(link)) {
      base = resolveLink(link, *target);
      d.bridges = bridgesOnPath(base, addr);
    }
    const HeldDir held(*this, base);  // its attributes read by name from its directory
    // uevent carries driver, ids and class in one read instead of five.
    if (auto ev = optional(base + "/uevent")) readUevent(d, *ev);
    // `removable` appeared in 5.14; before that the kernel's verdict is invisible.
    if (auto r = root_->readFile(base + "/removable")) {
      auto v = trim(*r);
      d.removable = v == "removable" ? Removable::Removable : v == "fixed" ? Removable::Fixed : Removable::Unknown;
    } else {
      noteUnreadable(r.error());
    }
    if (auto vfs = root_->readFile(base + "/sriov_numvfs")) d.sriovNumVfs = std::atoi(vfs->c_str());
    if (withConfig) readConfig(d, base + "/config");
    if (d.driver) d.driverModule = driverModule(*d.driver);
    if (d.vendorId == kVirtioVendor && d.driver == "virtio-pci") d.virtio = readVirtio(base);
    return d;
  }

  // The virtioN child virtio-pci adds under its function, and whether it negotiated
  // VIRTIO_F_ACCESS_PLATFORM: `features` prints one '0' or '1' per bit, bit 0 first, all '0' until
  // a virtio driver binds and negotiates (docs/kernel.md §4.3).
  std::optional<VirtioChild> readVirtio(const std::string& base) {
    for (const auto& name : optionalDir(base).value_or(std::vector<std::string>{})) {
      if (!name.starts_with("virtio")) continue;
      VirtioChild v;
      v.name = name;
      if (!root_->readLink(base + "/" + name + "/driver")) return v;
      const auto features = optional(base + "/" + name + "/features").value_or("");
      const auto bits = trim(features);  // a view: `features` must outlive it
      if (bits.size() > kAccessPlatformBit) v.accessPlatform = bits[kAccessPlatformBit] == '1';
      return v;
    }
    return std::nullopt;
  }

  // Only a virtio device's bypass depends on it, and /proc/cpuinfo costs a walk over every CPU.
  void readConfidential() {
    bool virtio = std::any_of(host_.devices.begin(), host_.devices.end(), [](const PciDevice& d) { return d.virtio; });
    if (!virtio || host_.kernel.arch != Arch::X86) return;
    auto cpuinfo = optional("/proc/cpuinfo");
    host_.confidential = cpuinfo ? parseConfidential(*cpuinfo) : Confidential::Unknown;
  }

  // Built-in drivers without parameters have no `module` link; their name is the best guess.
  std::string driverModule(const std::string& driver) {
    auto [it, fresh] = moduleOfDriver_.try_emplace(driver, driver);
    if (fresh) {
      if (auto target = root_->readLink("/sys/bus/pci/drivers/" + driver + "/module")) {
        it->second = std::string(baseName(*target));
      }
    }
    return it->second;
  }

  void readNetdevs() {
    const HeldDir classDir(*this, "/sys/class/net");  // listed, and each interface's link read, from there
    auto names = optionalDir("/sys/class/net");
    if (!names) return;
    std::optional<std::set<std::string>> routed;
    std::optional<std::set<std::string>> addressed;
    for (const auto& name : *names) {
      std::string link = "/sys/class/net/" + name;
      auto target = root_->readLink(link);
      if (!target || target->find("/virtual/") != std::string::npos) continue;
      std::string base = resolveLink(link, *target);
      auto* dev = host_.device(core::pciFunctionOf(base));
      if (dev == nullptr) continue;
      if (!routed) {
        routed = parseRouteInterfaces(optional("/proc/net/route", kRouteReadLimit).value_or(""),
                                      optional("/proc/net/ipv6_route", kRouteReadLimit).value_or(""));
        addressed = parseGlobalInet6Interfaces(optional("/proc/net/if_inet6").value_or(""));
      }
      const HeldDir held(*this, base);
      NetDev nd;
      nd.name = name;
      nd.ifindex = std::atoi(optional(base + "/ifindex").value_or("0").c_str());
      nd.up = (parseHex64(optional(base + "/flags").value_or("0")).value_or(0) & 0x1U) != 0;  // IFF_UP
      nd.operstate = std::string(trim(optional(base + "/operstate").value_or("")));
      nd.mac = std::string(trim(optional(base + "/address").value_or("")));
      if (auto m = root_->readLink(base + "/master")) nd.master = std::string(baseName(*m));
      nd.hasRoute = routed->contains(name);
      nd.hasGlobalAddress = addressed->contains(name);
      dev->netdevs.push_back(std::move(nd));
    }
  }

  // Which interrupt chips serve the MSIs: the ITS isolates them (docs/kernel.md §4.2).
  void readIrqChips() {
    for (const auto& irq : optionalDir("/sys/kernel/irq").value_or(std::vector<std::string>{})) {
      auto text = optional("/sys/kernel/irq/" + irq + "/chip_name").value_or("");
      if (auto name = trim(text); !name.empty()) host_.irqChips.emplace(name);
    }
  }

  using Controllers = std::map<std::string, std::pair<std::string, NvmeController>>;  // name -> (address, controller)
  using Holders = std::map<std::string, std::vector<std::string>>;                    // block device -> its holders

  void readNvme() {
    // Controllers are filled here and handed to their PCI functions at the end.
    Controllers ctrls = readNvmeControllers();
    if (ctrls.empty()) return;
    Holders holdersOf;
    auto nvmeBlocks = readBlockClass(holdersOf);
    placeNvmeBlocks(nvmeBlocks, holdersOf, ctrls);
    for (auto& [name, entry] : ctrls) host_.device(entry.first)->nvme.push_back(std::move(entry.second));
    if (auto mi = optional("/proc/self/mountinfo")) host_.mounts = parseMountInfo(*mi);
    if (auto sw = optional("/proc/swaps")) host_.swaps = parseSwaps(*sw);
  }

  Controllers readNvmeControllers() {
    Controllers ctrls;
    const HeldDir classDir(*this, "/sys/class/nvme");  // listed, and each link read, from there
    for (const auto& name : optionalDir("/sys/class/nvme").value_or(std::vector<std::string>{})) {
      std::string link = "/sys/class/nvme/" + name;
      auto target = root_->readLink(link);
      if (!target) continue;
      std::string base = resolveLink(link, *target);
      std::string address = core::pciFunctionOf(base);
      if (host_.device(address) == nullptr) continue;  // fabrics controllers have no PCI function
      const HeldDir held(*this, base);
      NvmeController c;
      c.name = name;
      c.model = std::string(trim(optional(base + "/model").value_or("")));
      c.serial = std::string(trim(optional(base + "/serial").value_or("")));
      ctrls.emplace(name, std::pair{address, std::move(c)});
    }
    return ctrls;
  }

  // The stacked block devices (into host_.stackedBlock, with their holders) and the NVMe ones, as
  // (name, resolved path). Who holds what comes from the few stacked devices' slaves/ (dm, md,
  // bcache live under /sys/devices/virtual/block), not from listing holders/ of every namespace
  // and partition.
  std::vector<std::pair<std::string, std::string>> readBlockClass(Holders& holdersOf) {
    std::vector<std::pair<std::string, std::string>> nvmeBlocks;
    const HeldDir blockDir(*this, "/sys/class/block");
    for (const auto& name : optionalDir("/sys/class/block").value_or(std::vector<std::string>{})) {
      std::string link = "/sys/class/block/" + name;
      bool isNvme = name.starts_with("nvme");
      if (!isNvme && !name.starts_with("dm-") && !name.starts_with("md") && !name.starts_with("bcache")) continue;
      auto target = root_->readLink(link);
      if (!target) continue;
      std::string base = resolveLink(link, *target);
      if (isNvme) {
        nvmeBlocks.emplace_back(name, base);
        continue;
      }
      BlockDev b;
      b.name = name;
      b.devNum = std::string(trim(optional(base + "/dev").value_or("")));
      for (const auto& slave : optionalDir(base + "/slaves").value_or(std::vector<std::string>{})) {
        holdersOf[slave].push_back(name);
      }
      host_.stackedBlock[name] = std::move(b);
    }
    for (auto& [name, stacked] : host_.stackedBlock) stacked.holders = holdersOf[name];
    return nvmeBlocks;
  }

  // An NVMe block device's controller and disk, from its path:
  // .../nvme/nvme0/nvme0n1[/nvme0n1p1] or .../nvme-subsystem/nvme-subsys0/nvme0n1[/...]
  std::pair<std::string, std::string> nvmeOwner(std::string_view base, const Controllers& ctrls,
                                                std::map<std::string, std::string>& subsystemCtrl) {
    auto parts = split(base, '/');
    std::string ctrl;
    std::string disk;
    for (size_t i = 0; i + 2 < parts.size(); ++i) {
      if (parts[i] == "nvme" && ctrls.contains(std::string(parts[i + 1]))) {
        ctrl = std::string(parts[i + 1]);
      } else if (parts[i] == "nvme-subsystem") {
        ctrl = subsystemController(std::string(parts[i + 1]), ctrls, subsystemCtrl);
      } else {
        continue;
      }
      disk = std::string(parts[i + 2]);
    }
    return {ctrl, disk};
  }

  // Each namespace to its controller, each partition to its namespace.
  void placeNvmeBlocks(const std::vector<std::pair<std::string, std::string>>& nvmeBlocks, Holders& holdersOf,
                       Controllers& ctrls) {
    std::map<std::string, std::string> subsystemCtrl;  // nvme-subsysN -> a controller name
    std::map<std::string, std::string> diskCtrl;       // "nvme0n1" -> controller name
    for (const auto& [name, base] : nvmeBlocks) {
      const auto placed = nvmeOwner(base, ctrls, subsystemCtrl);
      const std::string& ctrl = placed.first;
      const std::string& disk = placed.second;
      // Hidden per-path disks of native multipath (nvme0c0n1) are reached through their head.
      if (ctrl.empty() || disk.empty() || name.find('c') != std::string::npos) continue;
      const HeldDir held(*this, base);  // its `dev` read with one path walk instead of two
      BlockDev b;
      b.name = name;
      b.devNum = std::string(trim(optional(base + "/dev").value_or("")));
      b.holders = holdersOf[name];
      if (name == disk) {
        ctrls.at(ctrl).second.namespaces.push_back(NvmeNamespace{std::move(b), {}});
        diskCtrl[name] = ctrl;
      } else if (diskCtrl.contains(disk)) {
        auto& owner = ctrls.at(diskCtrl[disk]).second.namespaces;
        auto ns = std::find_if(owner.begin(), owner.end(), [&](const NvmeNamespace& n) { return n.disk.name == disk; });
        if (ns != owner.end()) ns->partitions.push_back(std::move(b));
      }
    }
  }

  std::string subsystemController(const std::string& subsys,
                                  const std::map<std::string, std::pair<std::string, NvmeController>>& ctrls,
                                  std::map<std::string, std::string>& cache) {
    auto it = cache.find(subsys);
    if (it != cache.end()) return it->second;
    std::string found;
    for (const auto& e : optionalDir("/sys/class/nvme-subsystem/" + subsys).value_or(std::vector<std::string>{})) {
      if (ctrls.contains(e)) {
        found = e;
        break;
      }
    }
    cache.emplace(subsys, found);
    return found;
  }

  void readThunderbolt() {
    const HeldDir busDir(*this, "/sys/bus/thunderbolt/devices");  // listed, and each link read, from there
    auto names = optionalDir("/sys/bus/thunderbolt/devices");
    if (!names) return;
    for (const auto& name : *names) {
      if (!name.starts_with("domain")) continue;
      std::string link = "/sys/bus/thunderbolt/devices/" + name;
      auto target = root_->readLink(link);
      std::string base = target ? resolveLink(link, *target) : link;
      ThunderboltDomain t;
      t.name = name;
      t.security = std::string(trim(optional(base + "/security").value_or("")));
      if (auto p = optional(base + "/iommu_dma_protection")) t.iommuDmaProtection = trim(*p) == "1";
      host_.thunderbolt.push_back(std::move(t));
    }
  }

  void readSwiotlb() {
    // debugfs is root-only; one unreadable note is enough.
    auto num = [&](const char* file) -> std::optional<uint64_t> {
      auto r = root_->readFile(std::string("/sys/kernel/debug/swiotlb/") + file);
      if (!r) {
        if (file == std::string_view("io_tlb_nslabs")) noteUnreadable(r.error());
        return std::nullopt;
      }
      return std::strtoull(r->c_str(), nullptr, 10);
    };
    host_.swiotlb.nslabs = num("io_tlb_nslabs");
    // The kernel creates the directory always and its files only for a pool that exists: an
    // empty directory means no pool (docs/kernel.md §6), not an unknown one.
    if (!host_.swiotlb.nslabs) {
      auto dir = root_->listDir("/sys/kernel/debug/swiotlb");
      if (dir && dir->empty()) host_.swiotlb.nslabs = 0;
      // The mount point sysfs keeps for debugfs, empty: debugfs is not mounted, which is a reason
      // the swiotlb line is missing, not an absence of swiotlb.
      auto debug = root_->listDir("/sys/kernel/debug");
      if (debug && debug->empty()) {
        host_.unreadable.push_back({root_->hostPath("/sys/kernel/debug"),
                                    "debugfs is not mounted (mount it with: mount -t debugfs none /sys/kernel/debug)"});
      }
      return;
    }
    host_.swiotlb.used = num("io_tlb_used");
    host_.swiotlb.usedHiwater = num("io_tlb_used_hiwater");
  }

  // Reads through a directory held open (Root::within) while it lives: the files directly in it
  // are opened by name, without walking their whole path from the root each time.
  class HeldDir {
   public:
    HeldDir(Reader& reader, const std::string& dir)
        : reader_(reader), saved_(reader.root_), held_(saved_->within(dir)) {
      reader_.root_ = &held_;
    }
    ~HeldDir() { reader_.root_ = saved_; }
    HeldDir(const HeldDir&) = delete;
    HeldDir& operator=(const HeldDir&) = delete;

   private:
    Reader& reader_;
    const Root* saved_;
    Root held_;
  };

  const Root* root_;
  BootFacts* boot_;
  HostFacts host_;
  std::map<std::string, std::string> moduleOfDriver_;
  std::map<std::string, Unreadable> configNotes_;  // by PCI address
};

}  // namespace

Result<HostFacts> readHost(const Root& root, BootFacts* boot) {
  const Root held = root.held();
  return Reader(held, boot).run();
}

HostFacts rereadGroup(const Root& root, HostFacts planned, int id) {
  const Root held = root.held();
  return Reader(held).rereadGroup(std::move(planned), id);
}

Module readModule(const Root& root, const std::string& name) {
  Module m;
  m.name = name;
  std::string dir = "/sys/module/" + name;
  const Root held = root.within(dir + "/parameters");  // listed, and each parameter read by name, from there
  auto params = held.listDir(dir + "/parameters");
  if (params) {
    m.loaded = true;
    for (const auto& p : *params) {
      std::string path = dir;
      path.append("/parameters/").append(p);
      ModuleParam param;
      // Write-only parameters (0200) exist too: their value is unknown, not empty.
      if (auto v = held.readFile(path)) param.value = std::string(trim(*v));
      param.writable = (held.fileMode(path).valueOr(0U) & 0222U) != 0;
      m.params.emplace(p, std::move(param));
    }
  } else {
    m.loaded = root.listDir(dir).ok();
  }
  m.builtin = m.loaded && !root.readFile(dir + "/initstate").ok();
  if (auto conf = root.readFile("/etc/modprobe.d/iommud-" + name + ".conf")) {
    for (auto line : split(*conf, '\n')) {
      auto w = words(line);
      if (w.size() < 3 || w[0] != "options" || w[1] != name) continue;
      for (size_t i = 2; i < w.size(); ++i) {
        auto eq = w[i].find('=');
        m.iommudOptions[std::string(w[i].substr(0, eq))] =
            eq == std::string_view::npos ? "" : std::string(w[i].substr(eq + 1));
      }
    }
  }
  return m;
}

}  // namespace iommud::adapters::sysfs
