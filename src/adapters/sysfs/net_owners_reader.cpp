#include "adapters/sysfs/net_owners_reader.hpp"

#include <sys/stat.h>

#include <array>
#include <cerrno>

#include "core/text.hpp"

namespace iommud::adapters::sysfs {
namespace {

using core::NetOwnerSources;

// Configuration files are small; anything bigger is not read whole (and its owners stay unknown).
constexpr off_t kMaxFileSize = off_t{1} << 20;

// systemd's NETWORK_DIRS, highest priority first. Debian 12 builds v252 with split-usr, so /lib
// counts too; on merged-/usr hosts it is a link to /usr/lib and its names are shadowed there.
constexpr std::array<std::string_view, 5> kLinkDirs = {"/etc/systemd/network", "/run/systemd/network",
                                                       "/usr/local/lib/systemd/network", "/usr/lib/systemd/network",
                                                       "/lib/systemd/network"};

// NetworkManager's keyfile directories (nms-keyfile-plugin.c): per UUID /run shadows /etc shadows
// /usr/lib; only /etc loads names without ".nmconnection"; tombstones count in /run and /etc.
struct NmDir {
  std::string_view path;
  int rank;
  bool requireExtension;
  bool tombstones;
};
constexpr std::array kNmDirs = {NmDir{"/run/NetworkManager/system-connections", 0, true, true},
                                NmDir{"/etc/NetworkManager/system-connections", 1, false, true},
                                NmDir{"/usr/lib/NetworkManager/system-connections", 2, true, false}};

class SourceReader {
 public:
  explicit SourceReader(const Root& root) : root_(root) {}

  NetOwnerSources run() {
    readNm();
    readLinks();
    return std::move(out_);
  }

 private:
  void unreadable(const std::string& path, const core::Error& e) { out_.unreadable.push_back({path, e.message}); }

  // An absent directory is normal; one that exists but cannot be listed may hide owners.
  std::vector<std::string> list(const std::string& dir) {
    auto r = root_.listDir(dir);
    if (r) return std::move(r).value();
    if (r.error().code != ENOENT && r.error().code != ENOTDIR) unreadable(dir, r.error());
    return {};
  }

  // stat() through the root, following links as the programs do; nullopt when absent or unreadable.
  std::optional<struct stat> statPath(const std::string& path) {
    struct stat st {};
    if (::stat(root_.hostPath(path).c_str(), &st) == 0) return st;
    int err = errno;
    if (err != ENOENT) unreadable(path, core::errnoError(err, path));
    return std::nullopt;
  }

  std::optional<std::string> read(const std::string& path, const struct stat& st) {
    if (st.st_size > kMaxFileSize) {
      out_.unreadable.push_back({path, "larger than 1 MiB, not read"});
      return std::nullopt;
    }
    auto r =
        root_.readFile(path, static_cast<size_t>(kMaxFileSize));  // a procfs file reports size 0 (docs/kernel.md §13)
    if (r) return std::move(r).value();
    if (r.error().code != ENOENT) unreadable(path, r.error());
    return std::nullopt;
  }

  void readNm() {
    std::vector<core::NmCandidate> candidates;
    for (const auto& d : kNmDirs) {
      std::string dir(d.path);
      for (const auto& name : list(dir)) {
        std::string path = dir + "/" + name;
        if (auto uuid = core::nmmetaUuid(name); d.tombstones && !uuid.empty()) {
          // A tombstone is a link to /dev/null (nms_keyfile_nmmeta_write()).
          if (auto target = root_.readLink(path); target && *target == "/dev/null") {
            candidates.push_back({d.rank, std::nullopt, uuid});
          }
          continue;
        }
        if (!core::isNmKeyfileName(name, d.requireExtension)) continue;
        auto st = statPath(path);
        if (!st || !S_ISREG(st->st_mode)) continue;
        // nms_keyfile_utils_check_file_permissions(): NetworkManager skips a keyfile not owned by
        // root or open to group or others. Owners mean nothing in a captured tree: checked live only.
        if ((st->st_mode & 077U) != 0 || (root_.isLive() && st->st_uid != 0)) continue;
        auto text = read(path, *st);
        if (!text) continue;
        candidates.push_back({d.rank, core::parseNmKeyfile(path, *text), {}});
      }
    }
    out_.nmProfiles = core::effectiveNmProfiles(std::move(candidates));
  }

  // Entries conf_files_list() takes: files and links to them (a masking link to /dev/null too),
  // not directories.
  core::ConfDir confDir(const std::string& dir, std::string_view suffix) {
    core::ConfDir d{dir, {}};
    for (auto& name : list(dir)) {
      if (!name.ends_with(suffix)) continue;
      struct stat st {};
      if (::stat(root_.hostPath(dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
      d.names.push_back(std::move(name));
    }
    return d;
  }

  // The text udev parses: a masked file (empty, or a link to /dev/null) reads as nothing.
  std::optional<std::string> readConf(const std::string& path) {
    auto st = statPath(path);
    if (!st) return std::nullopt;
    if (!S_ISREG(st->st_mode)) return std::string();
    return read(path, *st);
  }

  // The same subdirectory ("" or "foo.link.d") of every .link directory.
  std::vector<core::ConfDir> linkDirs(const std::string& sub, std::string_view suffix) {
    std::vector<core::ConfDir> dirs;
    dirs.reserve(kLinkDirs.size());
    for (auto d : kLinkDirs) dirs.push_back(confDir(std::string(d) + sub, suffix));
    return dirs;
  }

  void readLinks() {
    for (const auto& path : core::effectiveConfFiles(linkDirs("", ".link"), ".link")) {
      auto text = readConf(path);
      core::LinkFile file = core::parseLinkFile(path, text.value_or(""));
      file.readable = text.has_value();
      std::string dropInDir = "/" + std::string(baseName(path)) + ".d";
      for (const auto& dropIn : core::effectiveConfFiles(linkDirs(dropInDir, ".conf"), ".conf")) {
        auto more = readConf(dropIn);
        if (!more) file.readable = false;  // the drop-in may change anything: the file only may apply
        core::applyLinkDropIn(file, dropIn, more.value_or(""));
      }
      out_.linkFiles.push_back(std::move(file));
    }
  }

  const Root& root_;
  NetOwnerSources out_;
};

// udev's ID_PATH for a netdev: path_id prepends "pci-<function>" for the nearest PCI function,
// skips the PCI bridges above it and, for virtio-net, the virtio device below it; above the host
// bridge (pciDDDD:BB, no subsystem) a platform device, as on arm64 device-tree hosts
// (/sys/devices/platform/4010000000.pcie/pci0000:00/...), adds "platform-<name>-" and ends the
// path (path_id's handle_platform skips the platform devices above it). Only these shapes
// /sys/devices/[platform/.../<name>/]pciDDDD:BB/<functions...>/[virtioN/]net/<if> are known; other
// topologies (VMD, USB) add parts iommud does not model.
std::optional<std::string> idPathOf(std::string_view resolved, const core::PciDevice& device) {
  auto parts = core::split(resolved, '/');
  // "", "sys", "devices", ["platform", ..., name,] "pci0000:00", functions..., ["virtio0"], "net", ifname
  if (parts.size() < 7 || parts[1] != "sys" || parts[2] != "devices") return std::nullopt;
  size_t host = 3;
  std::string prefix;
  if (parts[3] == "platform") {
    host = 4;
    // The host bridge's name: "pci" DDDD ":" BB (pci_register_host_bridge()).
    auto hostBridge = [](std::string_view p) { return p.size() == 10 && p.starts_with("pci") && p[7] == ':'; };
    while (host < parts.size() && !hostBridge(parts[host])) ++host;
    if (host < 5 || host >= parts.size()) return std::nullopt;
    prefix = "platform-" + std::string(parts[host - 1]) + "-";
  }
  if (!parts[host].starts_with("pci") || parts.size() < host + 4) return std::nullopt;
  size_t net = parts.size() - 2;
  if (parts[net] != "net") return std::nullopt;
  size_t last = net - 1;
  if (parts[last].starts_with("virtio")) --last;
  if (last <= host) return std::nullopt;
  for (size_t i = host + 1; i <= last; ++i) {
    if (!core::isPciAddress(parts[i])) return std::nullopt;
  }
  if (parts[last] != device.address) return std::nullopt;
  return prefix + "pci-" + device.address;
}

}  // namespace

core::NetOwnerSources readNetOwnerSources(const Root& root) {
  return SourceReader(root).run();
}

core::NicIdentity readNicIdentity(const Root& root, const core::PciDevice& device, const core::NetDev& netdev) {
  core::NicIdentity id;
  id.name = netdev.name;
  std::string link = "/sys/class/net/" + netdev.name;
  std::string base = link;
  if (auto target = root.readLink(link)) base = resolveLink(link, *target);
  auto attr = [&](std::string_view name) -> std::optional<std::string> {
    auto r = root.readFile(base + "/" + std::string(name));
    if (!r) return std::nullopt;
    return std::string(core::trim(*r));
  };

  id.mac = core::normalizeMac(netdev.mac.empty() ? attr("address").value_or("") : netdev.mac);
  // register_netdevice() copies the address into perm_addr when addr_assign_type is NET_ADDR_PERM
  // (0), and dev_set_mac_address() turns it into NET_ADDR_SET: 0 means the current is the permanent.
  if (id.mac && attr("addr_assign_type") == "0") id.permanentMac = id.mac;
  // name_assign_type (3.17+): 1 enumerated, 2 predictable, 3 given by user space at creation: the
  // kernel's own name. 4 is renamed, and reading it fails for NET_NAME_UNKNOWN: original unknown.
  if (auto how = attr("name_assign_type"); how == "1" || how == "2" || how == "3") id.originalName = netdev.name;

  // net_get_type_string(): the uevent's DEVTYPE ("wlan") if any, else the ARPHRD name.
  std::string devtype;
  // Held in a variable: split's views point into it, and a temporary in the loop's range would
  // be gone before the loop runs (C++20 extends the life of the range, not of its arguments).
  const std::string uevent = attr("uevent").value_or("");
  for (auto line : core::split(uevent, '\n')) {
    if (line.starts_with("DEVTYPE=")) devtype = std::string(line.substr(8));
  }
  auto arphrd = attr("type");
  if (!devtype.empty()) {
    id.type = devtype;
  } else if (arphrd == "1") {
    id.type = "ether";
  } else if (arphrd == "32") {
    id.type = "infiniband";
  }

  // The netdev's own driver is what ethtool -i and udev report: virtio_net, not virtio-pci.
  if (auto driver = root.readLink(base + "/device/driver")) {
    id.driver = std::string(baseName(*driver));
  } else if (device.driver) {
    id.driver = *device.driver;
  }
  id.kind = "";  // a PCI function's netdev has no rtnetlink kind
  id.idPath = idPathOf(base, device);
  if (id.idPath) {
    id.properties["ID_PATH"] = *id.idPath;
    id.properties["ID_BUS"] = "pci";  // 75-net-description.rules, for netdevs below a PCI device
  }
  return id;
}

}  // namespace iommud::adapters::sysfs
