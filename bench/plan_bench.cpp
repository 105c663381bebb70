// The planner's budget: core::plan() for a host of 4096 PCI devices against 200 rules in at most
// 20 ms. The host is built in memory (this measures the planner, not sysfs reading) and the rules
// are generated as TOML text and go through config::parsePolicyText, as the daemon loads them.
// HostMode and findings are computed once, outside the timing, as the daemon does per probe.
//
// Times (min/median/max of this thread's CPU time, and wall time beside it): the parse of the
// 200-rule text, plan() for the whole host, and plan() with PlanOptions::device (a hotplug of one
// NIC). Exits 1 when the whole-host CPU median exceeds the budget: CPU time is what the planner
// costs; wall time on a busy machine adds whatever else runs.
//
// Usage: bench_plan [--runs=N] [--budget-ms=X] [--overlap] [--only=parse|plan|device] [--dump-rules]
//   --overlap makes every rule variant select every device of its kind (a stress case, see
//     generateRules); the budget is for the default rules.
//   --only times one part, for a profiler (perf record -g build/bin/bench_plan --only=plan).
//   --dump-rules prints the generated policy text and exits.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/policy_loader.hpp"
#include "core/cmdline.hpp"
#include "core/findings.hpp"
#include "core/mode.hpp"
#include "core/plan.hpp"

namespace {

using namespace iommud;  // NOLINT(google-build-using-namespace): a benchmark, nothing else here
using Clock = std::chrono::steady_clock;

constexpr int kDevices = 4096;
constexpr int kRules = 200;

std::string hex(unsigned v, int width) {
  std::string s(static_cast<size_t>(width), '0');
  for (int i = width - 1; i >= 0 && v != 0; --i, v >>= 4U) s[static_cast<size_t>(i)] = "0123456789abcdef"[v & 0xfU];
  return s;
}

// A NIC model: its PCI ids, driver, and what ethtool reports for it.
struct NicModel {
  uint16_t vendor, device, subVendor, subDevice;
  const char* driver;
  int ports;
  core::EthtoolState ethtool;
};

core::EthtoolState ethtool(std::map<std::string, uint32_t> rings, std::map<std::string, uint32_t> ringsMax,
                           uint32_t combined, uint32_t combinedMax, std::map<std::string, uint32_t> coalesce) {
  core::EthtoolState e;
  e.read = true;
  e.rings = std::move(rings);
  e.ringsMax = std::move(ringsMax);
  e.channels = {{"combined", combined}};
  e.channelsMax = {{"combined", combinedMax}};
  e.coalesce = std::move(coalesce);
  return e;
}

const std::vector<NicModel>& nicModels() {
  static const std::vector<NicModel> models = {
      {0x8086, 0x159b, 0x8086, 0x0003, "ice", 2,
       ethtool({{"rx", 2048}, {"tx", 2048}, {"tcp-data-split", 0}}, {{"rx", 8160}, {"tx", 8160}}, 32, 64,
               {{"rx-usecs", 50}, {"tx-usecs", 50}, {"adaptive-rx", 1}, {"adaptive-tx", 1}})},
      {0x15b3, 0x101d, 0x15b3, 0x0016, "mlx5_core", 2,
       ethtool({{"rx", 1024}, {"tx", 1024}, {"cqe-size", 64}}, {{"rx", 8192}, {"tx", 8192}}, 16, 63,
               {{"rx-usecs", 8},
                {"rx-frames", 128},
                {"tx-usecs", 16},
                {"tx-frames", 32},
                {"adaptive-rx", 1},
                {"adaptive-tx", 1},
                {"cqe-mode-rx", 1},
                {"cqe-mode-tx", 1}})},
      {0x8086, 0x1572, 0x8086, 0x0004, "i40e", 4,
       ethtool({{"rx", 512}, {"tx", 512}}, {{"rx", 4096}, {"tx", 4096}}, 8, 64,
               {{"rx-usecs", 50}, {"tx-usecs", 50}, {"adaptive-rx", 1}, {"adaptive-tx", 1}})},
      {0x14e4, 0x16d7, 0x14e4, 0x1402, "bnxt_en", 2,
       ethtool({{"rx", 511}, {"tx", 511}, {"rx-jumbo", 2044}}, {{"rx", 2047}, {"tx", 2047}, {"rx-jumbo", 8191}}, 8, 74,
               {{"rx-usecs", 14}, {"rx-frames", 15}, {"tx-usecs", 28}, {"tx-frames", 30}})},
      {0x8086, 0x1533, 0x15d9, 0x1533, "igb", 1,
       ethtool({{"rx", 256}, {"tx", 256}}, {{"rx", 4096}, {"tx", 4096}}, 4, 8, {{"rx-usecs", 3}, {"tx-usecs", 3}})},
  };
  return models;
}

// The Thunderbolt NIC: an AQC107 in a Thunderbolt 3 enclosure.
const NicModel& tbtNic() {
  static const NicModel m{0x1d6a,
                          0x07b1,
                          0x1d6a,
                          0x0001,
                          "atlantic",
                          1,
                          ethtool({{"rx", 2048}, {"tx", 4096}}, {{"rx", 8184}, {"tx", 8184}}, 4, 8,
                                  {{"rx-usecs", 256}, {"tx-usecs", 1022}})};
  return m;
}

// Builds a server-like host: PCI domains of root ports, each slot with what sits behind it.
class HostBuilder {
 public:
  HostBuilder() { setUpHost(); }

  core::HostFacts build(int devices) {
    for (int slot = 0; static_cast<int>(host_.devices.size()) < devices; ++slot) {
      int left = devices - static_cast<int>(host_.devices.size());
      switch (slot % 16) {
        case 0:
        case 4:
        case 9:
        case 13: addNic(slot, left); break;
        case 1:
        case 5:
        case 10:
        case 14: addNvme(slot, left); break;
        case 2:
        case 11: addNvmeSwitch(slot, left); break;
        case 3: addThunderbolt(left); break;
        case 6: addGpu(left); break;
        case 7: addAccelerators(left); break;
        case 8: addNicNvmeShared(left); break;
        default: addMisc(slot, left); break;
      }
    }
    std::sort(host_.devices.begin(), host_.devices.end(),
              [](const core::PciDevice& a, const core::PciDevice& b) { return a.address < b.address; });
    for (auto& g : host_.groups) std::sort(g.devices.begin(), g.devices.end());
    core::assessUse(host_);
    return std::move(host_);
  }

 private:
  void setUpHost() {
    auto& k = host_.kernel;
    k.release = "6.12.10-amd64";
    k.procVersion =
        "Linux version 6.12.10-amd64 (debian-kernel@lists.debian.org) (gcc-14 (Debian 14.2.0-12) 14.2.0) #1 SMP "
        "PREEMPT_DYNAMIC Debian 6.12.10-1 (2025-01-18)";
    k.upstream = core::UpstreamVersion{core::KernelVersion{6, 12, 10}, core::VersionSource::ProcVersion};
    k.cmdline =
        "BOOT_IMAGE=/boot/vmlinuz-6.12.10-amd64 root=/dev/mapper/vg0-root ro quiet iommu.strict=1 "
        "nvme_core.multipath=Y";
    k.iommuCmdline = core::interpretIommuCmdline(core::parseCmdline(k.cmdline), core::Arch::X86);
    k.config = {{"CONFIG_INTEL_IOMMU", "y"},
                {"CONFIG_INTEL_IOMMU_DEFAULT_ON", "y"},
                {"CONFIG_IOMMU_DEFAULT_DMA_LAZY", "y"},
                {"CONFIG_IOMMU_DEFAULT_DMA_STRICT", "n"}};
    k.configSource = "/boot/config-6.12.10-amd64";
    host_.firmware.tables = {"DMAR"};
    host_.firmware.dmarPlatformOptIn = false;
    // Sapphire Rapids-like VT-d units: pass-through, queued invalidation, no Caching Mode, no RWBF.
    for (int i = 0; i < 8; ++i) {
      host_.units.push_back(core::IommuUnit{"dmar" + std::to_string(i), core::Vendor::Intel, "1:0",
                                            core::IntelCaps{0xd2008c40660462, 0xf050da}, std::nullopt});
    }
    host_.thunderbolt.push_back(core::ThunderboltDomain{"domain0", "user", true});
    host_.mounts.push_back(core::Mount{"253:0", "/", "/dev/mapper/vg0-root", "ext4"});
    host_.stackedBlock["dm-0"] = core::BlockDev{"dm-0", "253:0", {}};
    auto mod = [&](const std::string& name, std::map<std::string, core::ModuleParam> params, bool builtin = false) {
      host_.modules[name] = core::Module{name, true, builtin, std::move(params), {}};
    };
    mod("nvme", {{"poll_queues", {"0", false}},
                 {"io_queue_depth", {"1024", false}},
                 {"max_host_mem_size_mb", {"128", true}},
                 {"use_threaded_interrupts", {"0", false}}});
    mod("nvme_core",
        {{"multipath", {"Y", false}}, {"default_ps_max_latency_us", {"100000", true}}, {"io_timeout", {"30", true}}});
    mod("ice", {});
    mod("mlx5_core", {{"prof_sel", {"2", false}}, {"debug_mask", {"0", true}}});
    mod("i40e", {{"debug", {"0", false}}});
    mod("bnxt_en", {});
    mod("igb", {{"max_vfs", {"0", false}}, {"debug", {"0", false}}});
    mod("atlantic", {{"aq_itr", {"255", false}}, {"aq_itr_rx", {"0", false}}, {"aq_itr_tx", {"0", false}}});
    mod("vfio_pci", {{"disable_idle_d3", {"N", true}}, {"nointxmask", {"N", true}}});
    mod("snd_hda_intel", {{"power_save", {"1", true}}});
    mod("xhci_hcd", {{"quirks", {"0", true}}});
    mod("ahci", {{"mobile_lpm_policy", {"3", false}}}, true);
  }

  // Addresses: root ports on bus 00 of a PCI domain, what sits behind them on fresh buses.
  std::string rootPortAddress() {
    if (rootPort_ >= 31 * 8 || bus_ > 0xf0) nextDomain();
    int r = rootPort_++;
    return address(0, 1 + r / 8, r % 8);
  }
  int freshBus() {
    if (bus_ > 0xfe) nextDomain();
    return bus_++;
  }
  void nextDomain() {
    ++domain_;
    rootPort_ = 0;
    bus_ = 1;
  }
  std::string address(int bus, int dev, int fn) const {
    return hex(static_cast<unsigned>(domain_), 4) + ":" + hex(static_cast<unsigned>(bus), 2) + ":" +
           hex(static_cast<unsigned>(dev), 2) + "." + std::to_string(fn);
  }
  // systemd's predictable names: enp<bus>s<slot>f<fn>, with P<domain> outside domain 0.
  std::string netdevName(int bus, int fn, const std::string& suffix = "") const {
    return "en" + (domain_ > 0 ? "P" + std::to_string(domain_) : std::string()) + "p" + std::to_string(bus) + "s0f" +
           std::to_string(fn) + suffix;
  }

  core::Group& newGroup(core::DomainType type = core::DomainType::Dma) {
    int id = static_cast<int>(host_.groups.size());
    // Some groups already run lazy or pass-through: set by hand or by an earlier iommud run.
    if (type == core::DomainType::Dma && id % 11 == 5) type = core::DomainType::DmaFq;
    if (type == core::DomainType::Dma && id % 23 == 7) type = core::DomainType::Identity;
    host_.groups.push_back(core::Group{id, type, std::string(core::toString(type)), {}});
    return host_.groups.back();
  }

  core::PciDevice& addDevice(core::Group& g, const std::string& addr, uint16_t vendor, uint16_t device,
                             uint32_t classCode, const char* driver, std::vector<std::string> bridges) {
    core::PciDevice d;
    d.address = addr;
    d.vendorId = vendor;
    d.deviceId = device;
    d.subsystemVendorId = vendor;
    d.subsystemDeviceId = 0x0000;
    d.classCode = classCode;
    if (driver != nullptr) {
      d.driver = driver;
      d.driverModule = driver;
      if (d.driverModule == "vfio-pci") d.driverModule = "vfio_pci";
    }
    d.group = g.id;
    d.removable = core::Removable::Fixed;
    d.bridges = std::move(bridges);
    g.devices.push_back(addr);
    host_.devices.push_back(std::move(d));
    return host_.devices.back();
  }

  std::string addRootPort(bool ownGroup = true, core::Group* into = nullptr) {
    std::string addr = rootPortAddress();
    core::Group& g = ownGroup ? newGroup() : *into;
    addDevice(g, addr, 0x8086, 0x352a, 0x060400, "pcieport", {});
    return addr;
  }

  void addNetdevs(core::PciDevice& d, const NicModel& m, int bus, int fn, bool inUse) {
    core::NetDev n;
    n.name = netdevName(bus, fn);
    n.ifindex = ++ifindex_;
    n.up = true;
    n.operstate = "up";
    n.hasGlobalAddress = inUse;
    n.hasRoute = inUse;
    n.ethtool = m.ethtool;
    d.subsystemVendorId = m.subVendor;
    d.subsystemDeviceId = m.subDevice;
    d.netdevs.push_back(std::move(n));
  }

  void addNic(int slot, int left) {
    const NicModel& m = nicModels()[static_cast<size_t>(slot / 16 + slot) % nicModels().size()];
    std::string port = addRootPort();
    int bus = freshBus();
    core::Group& g = newGroup();
    bool inUse = slot % 5 == 0;  // the uplink: addresses and routes
    int ports = std::min(m.ports, left - 1);
    for (int fn = 0; fn < ports; ++fn) {
      auto& d = addDevice(g, address(bus, 0, fn), m.vendor, m.device, 0x020000, m.driver, {port});
      addNetdevs(d, m, bus, fn, inUse && fn == 0);
    }
    // Every third mlx5 or ice NIC has SR-IOV on: the PF is in use, each VF has a group and netdev.
    if ((m.driver == std::string_view("mlx5_core") || m.driver == std::string_view("ice")) && slot % 3 == 0) {
      int vfs = std::min(8, left - 1 - ports);
      host_.devices[host_.devices.size() - static_cast<size_t>(ports)].sriovNumVfs = vfs;
      for (int v = 0; v < vfs; ++v) {
        core::Group& vg = newGroup();
        auto& d = addDevice(vg, address(bus, 1 + v / 8, v % 8), m.vendor, static_cast<uint16_t>(m.device + 1), 0x020000,
                            m.driver, {port});
        addNetdevs(d, m, bus, 0, false);
        d.netdevs.back().name = netdevName(bus, 0, "v" + std::to_string(v));
      }
    }
  }

  core::PciDevice& addNvmeController(core::Group& g, const std::string& addr, const std::string& port, bool removable) {
    static const uint16_t kVendors[] = {0x144d, 0x8086, 0x1344, 0x1e0f};
    static const uint16_t kDeviceIds[] = {0xa80a, 0x0b60, 0x51c3, 0x0007};
    size_t model = static_cast<size_t>(nvme_) % 4;
    auto& d = addDevice(g, addr, kVendors[model], kDeviceIds[model], 0x010802, "nvme", {port});
    d.subsystemVendorId = kVendors[model];
    d.subsystemDeviceId = static_cast<uint16_t>(0xa801 + model);
    if (removable) d.removable = core::Removable::Removable;
    core::NvmeController c;
    c.name = "nvme" + std::to_string(nvme_);
    c.model = "SYNTHETIC NVMe " + std::to_string(model);
    c.serial = "S" + std::to_string(100000 + nvme_);
    core::NvmeNamespace ns;
    ns.disk = core::BlockDev{c.name + "n1", "259:" + std::to_string(minor_++), {}};
    ns.partitions.push_back(core::BlockDev{c.name + "n1p1", "259:" + std::to_string(minor_++), {}});
    // One drive in five holds a mounted file system; one in nine is under LVM (the root volume).
    if (nvme_ % 5 == 0) {
      host_.mounts.push_back(core::Mount{ns.partitions.back().devNum, "/srv/data" + std::to_string(nvme_),
                                         "/dev/" + ns.partitions.back().name, "xfs"});
    } else if (nvme_ % 9 == 0) {
      ns.partitions.back().holders.push_back("dm-0");
    }
    c.namespaces.push_back(std::move(ns));
    d.nvme.push_back(std::move(c));
    ++nvme_;
    return d;
  }

  void addNvme(int /*slot*/, int /*left*/) {
    std::string port = addRootPort();
    core::Group& g = newGroup();
    addNvmeController(g, address(freshBus(), 0, 0), port, false);
  }

  // A PCIe switch without ACS: its bridges and two to four drives behind it share one group.
  void addNvmeSwitch(int slot, int left) {
    std::string port = addRootPort();
    core::Group& g = newGroup();
    int up = freshBus();
    addDevice(g, address(up, 0, 0), 0x1000, 0xc010, 0x060400, "pcieport", {port});
    int drives = std::min(2 + slot % 3, (left - 2) / 2);
    for (int i = 0; i < drives; ++i) {
      int down = freshBus();
      std::string bridge = address(down, 0, 0);
      addDevice(g, bridge, 0x1000, 0xc010, 0x060400, "pcieport", {port, address(up, 0, 0)});
      addNvmeController(g, address(freshBus(), 0, 0), port, false);
    }
  }

  // A Thunderbolt 3 dock: two Titan Ridge bridges, a 10GbE NIC and an NVMe enclosure behind them.
  void addThunderbolt(int left) {
    std::string port = addRootPort();
    int bus = freshBus();
    std::string up = address(bus, 0, 0);
    addDevice(newGroup(), up, 0x8086, 0x15ef, 0x060400, "pcieport", {port});
    std::string down = address(freshBus(), 0, 0);
    addDevice(newGroup(), down, 0x8086, 0x15ef, 0x060400, "pcieport", {port, up});
    if (left < 4) return;
    int nicBus = freshBus();
    auto& nic = addDevice(newGroup(), address(nicBus, 0, 0), tbtNic().vendor, tbtNic().device, 0x020000, "atlantic",
                          {port, up, down});
    addNetdevs(nic, tbtNic(), nicBus, 0, false);
    nic.thunderbolt = true;
    nic.thunderboltWhy = "behind Thunderbolt bridge " + up;
    nic.removable = core::Removable::Removable;
    auto& disk = addNvmeController(newGroup(), address(freshBus(), 0, 0), port, true);
    disk.thunderbolt = true;
    disk.thunderboltWhy = nic.thunderboltWhy;
  }

  void addGpu(int left) {
    std::string port = addRootPort();
    core::Group& g = newGroup();
    int bus = freshBus();
    addDevice(g, address(bus, 0, 0), 0x10de, 0x2204, 0x030000, "nvidia", {port});
    if (left > 2) addDevice(g, address(bus, 0, 1), 0x10de, 0x1aef, 0x040300, "snd_hda_intel", {port});
  }

  // Accelerators handed to VMs (vfio-pci), and one left without a driver.
  void addAccelerators(int left) {
    std::string port = addRootPort();
    int bus = freshBus();
    for (int fn = 0; fn < std::min(3, left - 1); ++fn) {
      addDevice(newGroup(), address(bus, 0, fn), 0x8086, 0x0d5c, 0x120000, fn == 2 ? nullptr : "vfio-pci", {port});
    }
  }

  // A board that puts an onboard NIC and an NVMe drive behind one bridge without ACS.
  void addNicNvmeShared(int left) {
    std::string port = addRootPort();
    core::Group& g = newGroup();
    int bus = freshBus();
    const NicModel& m = nicModels().back();
    auto& nic = addDevice(g, address(bus, 0, 0), m.vendor, m.device, 0x020000, m.driver, {port});
    addNetdevs(nic, m, bus, 0, false);
    if (left > 2) addNvmeController(g, address(bus, 0, 1), port, false);
  }

  void addMisc(int slot, int left) {
    std::string port = addRootPort();
    int bus = freshBus();
    addDevice(newGroup(), address(bus, 0, 0), 0x8086, 0x7ae0, 0x0c0330, "xhci_hcd", {port});
    if (left > 2) addDevice(newGroup(), address(bus, 0, 1), 0x8086, 0x7ae2, 0x010601, "ahci", {port});
    if (left > 3 && slot % 2 == 0) addDevice(newGroup(), address(bus, 0, 2), 0x8086, 0x7a23, 0x0c0500, nullptr, {port});
  }

  core::HostFacts host_;
  int domain_ = 0;
  int rootPort_ = 0;
  int bus_ = 1;
  int nvme_ = 0;
  int minor_ = 0;
  int ifindex_ = 1;
};

// 200 rules of the shapes the schema allows, as a large site would write them: 13 kinds of rule,
// each in variants that select devices by PCI domain (address or interface-name globs), so that a
// device meets a handful of rules, later variants override some earlier ones, and a few rules are
// for other hosts. With `overlap`, every variant selects every PCI domain: each device then meets
// all variants of a kind (a stress case: tens of thousands of overridden settings).
std::string generateRules(int count, bool overlap) {
  static const char* const kDrivers[] = {"ice", "mlx5_core", "i40e", "bnxt_en", "igb"};
  static const char* const kVendors[] = {"0x8086", "0x15b3", "0x14e4", "[0x8086, 0x15b3]"};
  constexpr int kDomains = 9;  // the synthetic host spans PCI domains 0000..0008
  std::string out = "# Generated by bench_plan: " + std::to_string(count) + " rules.\n";
  for (int i = 0; i < count; ++i) {
    const int v = i / 13;
    const char* drv = kDrivers[v % 5];
    const unsigned dom = static_cast<unsigned>((v + i % 13) % kDomains);
    // The PCI domain a variant is for, as an address glob and as interface-name globs.
    const std::string address = overlap ? "\"*\"" : "\"" + hex(dom, 4) + ":*\"";
    const std::string names = overlap    ? "[\"en*\"]"
                              : dom == 0 ? "[\"enp*\"]"
                                         : "[\"enP" + std::to_string(dom) + "p*\"]";
    std::string n = std::to_string(i);
    std::string r = "\n[[rule]]\nname = \"bench-" + std::string(i < 10 ? "00" : i < 100 ? "0" : "") + n + "-";
    switch (i % 13) {
      case 0:
        r += std::string("rings-") + drv + "\"\ndescription = \"Large rings on " + drv + " NICs\"\n" +
             (v % 2 == 0 ? "when = \"always\"\n" : "") + "[rule.match]\nkind = \"nic\"\ndriver = \"" + drv +
             "\"\naddress = " + address +
             "\nuntrusted = false\n[rule.unless]\nin-use = true\n[rule.host]\niommu = \"intel\"\n"
             "[rule.rings]\nrx = " +
             (v % 3 == 0 ? "\"max\"" : "4096") + "\ntx = \"max\"\n";
        break;
      case 1:
        r += "channels\"\ndescription = \"Channels by vendor\"\nwhen = \"always\"\n[rule.match]\nvendor = " +
             std::string(kVendors[v % 4]) + "\nclass = \"02\"\nname = " + names +
             "\n[rule.channels]\ncombined = " + (v % 2 == 0 ? "\"max\"" : std::to_string(8 * (1 + v % 4))) + "\n";
        break;
      case 2:
        r += "coalesce-names\"\ndescription = \"Coalescing by interface name\"\n" +
             std::string(v % 3 == 0 ? "mode = \"advise\"\n" : "") + "[rule.match]\nname = " + names +
             "\n[rule.unless]\nname = \"*v[0-9]\"\n[rule.coalesce]\nrx-usecs = " + std::to_string(10 + i) +
             "\nadaptive-rx = false\ntx-usecs = " + std::to_string(20 + v) + "\n";
        break;
      case 3:
        r += "nvme-alone-identity\"\ndescription = \"Single NVMe drives on the affected kernels\"\n"
             "mode = \"advise\"\ndomain = \"identity\"\naccept = [\"no-isolation\"]\n"
             "[rule.match]\nkind = \"nvme\"\ngroup-size = 1\naddress = " +
             address +
             "\n[rule.host]\n"
             "kernel = \">=6.10,<6.12.43 || >=6.13,<6.15.11 || >=6.16,<6.16.2\"\n";
        break;
      case 4:
        r += "nvme-shared-identity\"\ndescription = \"NVMe drives that share a group, iotlb_sync_map\"\n"
             "domain = \"identity\"\naccept = [\"no-isolation\"]\nwhen = \"always\"\n[rule.match]\n"
             "kind = \"nvme\"\nshares-group-with = \"nvme\"\naddress = " +
             address +
             "\n[[rule.unless]]\nin-use = true\n"
             "[[rule.unless]]\ndriver = \"vfio-pci\"\n[rule.host]\nfinding = \"vtd-iotlb-sync-map\"\n"
             "iommu = \"intel\"\n";
        break;
      case 5:
        r += "thunderbolt-nic\"\ndescription = \"Untrusted NICs: large rings, lazy refused\"\n"
             "domain = \"DMA-FQ\"\naccept = [\"lazy-invalidation\"]\n[rule.match]\nkind = \"nic\"\n"
             "untrusted = true\naddress = " +
             address + "\n[rule.rings]\nrx = \"max\"\ntx = \"max\"\n[rule.coalesce]\nadaptive-rx = true\nrx-usecs = " +
             std::to_string(100 + v) + "\n";
        break;
      case 6:
        r += "params\"\ndescription = \"Module parameters\"\n[rule.match]\ndriver = \"nvme\"\naddress = " + address +
             "\n[[rule.param]]\nname = \"poll_queues\"\nvalue = " + std::to_string(v % 4) +
             "\nat = \"load\"\n[[rule.param]]\nmodule = \"nvme_core\"\n"
             "name = \"default_ps_max_latency_us\"\nvalue = " +
             std::to_string(v % 2 == 0 ? 100000 : 0) +
             "\ntakes-effect = \"now\"\n[[rule.param]]\n"
             "module = \"nvme\"\nname = \"no_such_param\"\nvalue = true\noptional = " +
             (v % 2 == 0 ? "true" : "false") + "\n";
        break;
      case 7:
        r += std::string(
                 "other-host\"\ndescription = \"For another machine\"\ndomain = \"DMA-FQ\"\n"
                 "accept = [\"lazy-invalidation\"]\n[rule.match]\nkind = \"nic\"\n[rule.host]\niommu = ") +
             (v % 2 == 0 ? "\"amd\"" : "[\"arm-smmu-v3\", \"arm-smmu\"]") + "\nkernel = \">=6.1\"\n";
        break;
      case 8:
        r += "nvme-lazy\"\ndescription = \"Samsung and Micron drives lazy where VT-d is on by default\"\n"
             "domain = \"DMA-FQ\"\naccept = [\"lazy-invalidation\"]\n[rule.match]\nclass = \"0108\"\n"
             "subsystem-vendor = [0x144d, 0x1344]\nin-use = false\naddress = " +
             address +
             "\n[rule.host]\nmode = \"DMA\"\n"
             "cmdline-absent = [\"iommu=pt\", \"iommu.passthrough=1\"]\nfinding = \"default-on\"\n";
        break;
      case 9:
        r += "address-strict\"\ndescription = \"Strict DMA for accelerators and USB\"\ndomain = \"DMA\"\n"
             "when = \"always\"\n[rule.match]\naddress = " +
             (overlap ? std::string("\"*\"") : "\"" + hex(dom, 4) + ":[0-7]?:00.*\"") +
             "\nkind = [\"nic\", \"other\"]\n";
        break;
      case 10:
        r += "shared-auto\"\ndescription = \"Groups of several endpoints back to the default\"\n"
             "domain = \"auto\"\n[rule.match]\ngroup-size = \">=2\"\nshares-group = true\nkind = \"other\"\n"
             "address = " +
             address + "\n[rule.unless]\nvendor = 0x10de\n";
        break;
      case 11:
        r += std::string("mlx5-cmdline\"\ndescription = \"mlx5 on strict hosts\"\n[rule.match]\ndriver = \"") +
             (v % 2 == 0 ? "mlx5*" : "i40?") + "\"\nname = " + names +
             "\n[rule.host]\ncmdline = \"iommu.strict=1\"\ncaching-mode = false\nrwbf = false\n"
             "[rule.channels]\nother = 1\n[[rule.param]]\nmodule = \"mlx5_core\"\nname = \"debug_mask\"\n"
             "value = 1\noptional = true\n";
        break;
      default:
        r += "new-ring-keys\"\ndescription = \"Ring settings of newer kernels\"\nwhen = \"always\"\n"
             "[rule.match]\nkind = \"nic\"\ndevice = [0x159b, 0x101d, 0x1572]\naddress = " +
             address +
             "\n[rule.rings]\n"
             "hds-thresh = \"max\"\ntcp-data-split = \"enabled\"\nrx-buf-len = 4096\n";
        break;
    }
    out += r;
  }
  return out;
}

struct Stats {
  double min = 0, median = 0, max = 0;
};

Stats statsOf(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  double median = n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  return Stats{ms.front(), median, ms.back()};
}

// The CPU time of this thread: what the planner itself costs, without the time other processes
// of a busy machine (a parallel build, CI neighbours) take from it. Wall time is shown beside it.
double cpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Timing {
  Stats cpu, wall;
};

Timing timeIt(int warmup, int runs, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> cpu, wall;
  for (int i = 0; i < runs; ++i) {
    auto start = Clock::now();
    double cpuStart = cpuMs();
    fn();
    cpu.push_back(cpuMs() - cpuStart);
    wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return Timing{statsOf(std::move(cpu)), statsOf(std::move(wall))};
}

void print(const char* label, const Timing& t, int runs) {
  std::printf("%-40s cpu median %8.3f ms  min %8.3f  max %8.3f | wall median %8.3f ms  max %8.3f  (%d runs)\n", label,
              t.cpu.median, t.cpu.min, t.cpu.max, t.wall.median, t.wall.max, runs);
}

int intOption(std::string_view arg, std::string_view name, int current) {
  if (!arg.starts_with(name)) return current;
  return std::atoi(std::string(arg.substr(name.size())).c_str());
}

int run(int argc, char** argv) {
  int runs = 50;
  double budget = 20.0;
  std::string only;
  bool dump = false;
  bool overlap = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    runs = intOption(a, "--runs=", runs);
    if (a.starts_with("--budget-ms=")) budget = std::atof(std::string(a.substr(12)).c_str());
    if (a.starts_with("--only=")) only = a.substr(7);
    if (a == "--dump-rules") dump = true;
    if (a == "--overlap") overlap = true;
  }
  if (runs < 1) runs = 1;

  const std::string text = generateRules(kRules, overlap);
  if (dump) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  auto parsed = config::parsePolicyText(text, "bench.toml");
  for (const auto& d : parsed.diagnostics) std::fprintf(stderr, "%s\n", d.str().c_str());
  if (!parsed.diagnostics.empty() || static_cast<int>(parsed.rules.size()) != kRules) {
    std::fprintf(stderr, "bench_plan: the generated policy did not load cleanly (%zu of %d rules)\n",
                 parsed.rules.size(), kRules);
    return 1;
  }
  core::PolicySet policies;
  policies.files.push_back(core::PolicyFile{"bench.toml", "(generated)", false, {}});
  policies.rules = std::move(parsed.rules);

  const core::HostFacts host = HostBuilder().build(kDevices);
  const core::HostMode mode = core::deriveMode(host);
  const std::vector<core::Finding> findings = core::findings(host, mode);
  const core::PlanInput in{host, mode, findings};

  // A NIC that is not in use, for the one-device plan (as for a hotplug event).
  std::string one;
  for (const auto& d : host.devices) {
    if (d.kind() == core::DeviceKind::Nic && d.inUse.empty() && !d.untrusted()) {
      one = d.address;
      break;
    }
  }
  core::PlanOptions whole;
  core::PlanOptions single{.trigger = core::Trigger::Hotplug, .device = one};

  if (!only.empty()) {
    // For a profiler: just the one part, many times.
    for (int i = 0; i < runs; ++i) {
      if (only == "parse") (void)config::parsePolicyText(text, "bench.toml");
      if (only == "plan") (void)core::plan(in, policies, whole);
      if (only == "device") (void)core::plan(in, policies, single);
    }
    return 0;
  }

  size_t netdevs = 0;
  size_t nvme = 0;
  size_t untrusted = 0;
  size_t inUse = 0;
  for (const auto& d : host.devices) {
    netdevs += d.netdevs.size();
    nvme += d.nvme.size();
    untrusted += d.untrusted() ? 1 : 0;
    inUse += d.inUse.empty() ? 0 : 1;
  }
  std::set<std::string> domains;
  for (const auto& d : host.devices) domains.insert(d.address.substr(0, 4));
  std::map<size_t, int> groupSizes;
  for (const auto& g : host.groups) ++groupSizes[g.devices.size()];
  std::string sizes;
  for (const auto& [size, n] : groupSizes)
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(n) + "x" + std::to_string(size);
  std::printf(
      "host: %zu PCI devices in %zu PCI domains and %zu groups (sizes: %s), %zu netdevs, %zu NVMe controllers, %zu "
      "untrusted, %zu in use\n",
      host.devices.size(), domains.size(), host.groups.size(), sizes.c_str(), netdevs, nvme, untrusted, inUse);
  std::printf("mode: %s; %zu findings; policy: %zu rules, %zu bytes of TOML\n", mode.modeName().c_str(),
              findings.size(), policies.rules.size(), text.size());

  const core::Plan p = core::plan(in, policies, whole);
  std::map<core::SkipReason, int> reasons;
  for (const auto& s : p.skips) ++reasons[s.reason];
  std::string why;
  for (const auto& [r, n] : reasons)
    why += (why.empty() ? "" : ", ") + std::string(core::toString(r)) + " " + std::to_string(n);
  std::set<std::string> rulesUsed;
  for (const auto& c : p.changes) rulesUsed.insert(c.rule.name);
  for (const auto& s : p.satisfied) rulesUsed.insert(s.rule.name);
  for (const auto& s : p.skips) rulesUsed.insert(s.rule.name);
  std::printf(
      "plan (coldplug, whole host): %zu changes, %zu skips (%s), %zu satisfied; %zu of %zu rules appear in it\n",
      p.changes.size(), p.skips.size(), why.c_str(), p.satisfied.size(), rulesUsed.size(), policies.rules.size());
  const core::Plan q = core::plan(in, policies, single);
  std::printf("plan (hotplug of %s): %zu changes, %zu skips, %zu satisfied\n\n", one.c_str(), q.changes.size(),
              q.skips.size(), q.satisfied.size());

  // The results go to a sink that is printed, so that no optimizer may drop the calls.
  size_t sink = 0;
  int parseRuns = std::max(5, runs / 5);
  Timing parse = timeIt(2, parseRuns, [&] { sink += config::parsePolicyText(text, "bench.toml").rules.size(); });
  Timing full = timeIt(5, runs, [&] { sink += core::plan(in, policies, whole).changes.size(); });
  Timing dev = timeIt(5, runs, [&] { sink += core::plan(in, policies, single).changes.size(); });
  print("parsePolicyText (200 rules)", parse, parseRuns);
  print("plan, whole host (4096 devices)", full, runs);
  print("plan, one device (PlanOptions::device)", dev, runs);
  std::printf("(%zu results)\n", sink);

  if (full.cpu.median > budget) {
    std::fflush(stdout);
    std::fprintf(
        stderr,
        "bench_plan: FAILED: planning the whole host took %.3f ms of CPU (median), over the budget of %.1f ms\n",
        full.cpu.median, budget);
    return 1;
  }
  std::printf("\nwithin the budget: CPU median %.3f ms <= %.1f ms\n", full.cpu.median, budget);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_plan: %s\n", e.what());
    return 1;
  }
}
