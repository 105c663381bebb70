#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/names.hpp"

// Who else sets a NIC's rings, channels or coalescing: NetworkManager profiles (keyfiles) and
// systemd-udevd .link files. Pure: the adapter reads the files (adapters/sysfs/net_owners_reader)
// and everything here works on their text. A foreign file never makes iommud fail: a line that
// cannot be understood is skipped and noted as a ForeignIssue.

namespace iommud::core {

/// The ethtool group of a setting, as iommud's policies name it.
enum class NetSettingKind { Rings, Channels, Coalesce };
inline constexpr Names<NetSettingKind, 3> kNetSettingKindNames{
    {{NetSettingKind::Rings, "rings"}, {NetSettingKind::Channels, "channels"}, {NetSettingKind::Coalesce, "coalesce"}}};
static_assert(checkNames(kNetSettingKindNames, NetSettingKind::Coalesce));
std::string_view toString(NetSettingKind kind);  // "rings", "channels", "coalesce"

/// A ring, channel or coalescing value set in another program's configuration file.
struct ForeignSetting {
  NetSettingKind kind = NetSettingKind::Rings;
  std::string key;                 // iommud's ethtool name: "rx", "rx-jumbo", "combined", "rx-usecs", "adaptive-rx"
  std::string value;               // as written: "4096", "max", "50us", "yes"
  std::optional<uint32_t> number;  // in ethtool's unit (count, microseconds, 0/1); nullopt for "max"
  std::string file;
  int line = 0;

  bool operator==(const ForeignSetting&) const = default;
};

/// A line of a foreign file that was skipped or is suspect, and why.
struct ForeignIssue {
  std::string file;
  int line = 0;
  std::string message;

  bool operator==(const ForeignIssue&) const = default;
};

/// A NetworkManager connection profile (keyfile), reduced to where it applies and what it sets.
struct NmProfile {
  std::string path;
  std::string id;
  std::string uuid;
  std::string type;                          // [connection] type, "802-3-ethernet" spelled "ethernet"
  std::optional<std::string> interfaceName;  // [connection] interface-name
  std::optional<std::string> macAddress;     // [ethernet] mac-address, "aa:bb:cc:dd:ee:ff"
  std::vector<std::string> macDenylist;      // mac-address-blacklist / mac-address-denylist
  bool autoconnect = true;
  // The [match] setting (NetworkManager 1.14+): lists of patterns with "|", "&" and "!" prefixes.
  std::vector<std::string> matchInterfaceName, matchDriver, matchPath, matchKernelCommandLine;
  std::vector<ForeignSetting> settings;  // [ethtool] ring-*, channels-*, coalesce-*
  std::vector<ForeignIssue> issues;
  bool wellFormed = true;  // false: GLib's keyfile parser, and with it NetworkManager, may refuse the whole file
};

/// Parses a keyfile as NetworkManager writes it (GLib key-file syntax).
NmProfile parseNmKeyfile(std::string_view path, std::string_view text);

/// Whether NetworkManager loads a file of this name as a profile: not hidden, backup, temporary or
/// certificate; in /run and /usr/lib (`requireExtension`) only "*.nmconnection".
bool isNmKeyfileName(std::string_view name, bool requireExtension);

/// The UUID a tombstone "<uuid>.nmmeta" hides, or empty when the name is not one.
std::string nmmetaUuid(std::string_view name);

/// A profile or a tombstone (a "<uuid>.nmmeta" link to /dev/null) found in one of NetworkManager's
/// directories; rank 0 is /run, 1 /etc, 2 /usr/lib.
struct NmCandidate {
  int rank = 0;
  std::optional<NmProfile> profile;
  std::string tombstoneUuid;
};

/// The profiles NetworkManager uses: per UUID the one of the highest-priority directory, unless a
/// tombstone there hides it. Sorted by path.
std::vector<NmProfile> effectiveNmProfiles(std::vector<NmCandidate> candidates);

/// The [Match] section of a .link file and its drop-ins. Pattern lists keep systemd's form: a
/// leading "!" inverts the pattern.
struct LinkMatch {
  std::vector<std::string> macAddresses, permanentMacAddresses;          // "aa:bb:cc:dd:ee:ff"
  std::vector<std::string> originalNames, paths, drivers, types, kinds;  // globs
  std::vector<std::string> properties;                                   // "KEY=glob"
  std::vector<std::string> conditions;  // "Host=...", "KernelCommandLine=...": udev evaluates them, iommud does not

  [[nodiscard]] bool empty() const;
};

/// A systemd .link file with its drop-ins applied, as systemd-udevd loads it.
struct LinkFile {
  std::string path;
  std::vector<std::string> dropIns;
  bool readable = true;   // false: it or a drop-in could not be read: it may match, its settings are not all known
  bool rejected = false;  // a bad section header: systemd-udevd refuses the whole file
  LinkMatch match;
  std::vector<ForeignSetting> settings;  // the last assignment of each key, in the order of the keys
  std::vector<ForeignIssue> issues;
};

/// Parses a .link file (systemd's ini syntax: sections, `#`/`;` comments, `\` continuation).
LinkFile parseLinkFile(std::string_view path, std::string_view text);
/// Applies a drop-in ("foo.link.d/*.conf") over its file: lists grow, an empty value resets a key.
void applyLinkDropIn(LinkFile& file, std::string_view path, std::string_view text);

/// One directory of a search path and the entry names it holds.
struct ConfDir {
  std::string dir;
  std::vector<std::string> names;
};
/// systemd's conf-files rule: per name ending in `suffix`, the file of the first directory that has
/// it (directories highest priority first); the result is ordered by name, as full paths.
std::vector<std::string> effectiveConfFiles(const std::vector<ConfDir>& dirs, std::string_view suffix);

/// What iommud knows of a NIC when it asks who else configures it; nullopt where it does not know.
struct NicIdentity {
  std::string name;                               // the current name
  std::optional<std::string> originalName;        // the kernel's name before any rename (.link OriginalName=)
  std::optional<std::string> mac;                 // current, "aa:bb:cc:dd:ee:ff"
  std::optional<std::string> permanentMac;        // what NetworkManager's mac-address compares with
  std::optional<std::string> driver;              // as `ethtool -i` says: "ixgbe", "virtio_net"
  std::optional<std::string> idPath;              // udev's ID_PATH: "pci-0000:01:00.0"
  std::optional<std::string> type;                // as networkctl says: "ether", "wlan", "infiniband"
  std::optional<std::string> kind;                // rtnetlink kind; "" for a physical device
  std::map<std::string, std::string> properties;  // udev properties known for certain ("ID_BUS" = "pci")
};

/// Whether a file targets a NIC: Maybe when it depends on facts iommud does not have.
enum class MatchResult { No, Maybe, Yes };
/// A MatchResult and the condition that decided it.
struct MatchVerdict {
  MatchResult result = MatchResult::No;
  std::string reason;  // "interface-name=enp1s0", "Host= is evaluated by systemd-udevd, not by iommud"
};
MatchVerdict matchNmProfile(const NmProfile& profile, const NicIdentity& nic);
/// Whether the file's [Match] holds; first-match order is competingOwners' business.
MatchVerdict matchLinkFile(const LinkFile& file, const NicIdentity& nic);

/// Everything read from NetworkManager's and systemd-udevd's configuration, in their order.
struct NetOwnerSources {
  std::vector<NmProfile> nmProfiles;   // effectiveNmProfiles()
  std::vector<LinkFile> linkFiles;     // effectiveConfFiles() order, drop-ins applied
  std::vector<Unreadable> unreadable;  // host paths that exist but could not be read (or are over 1 MiB)
};

/// The program that would set the value: NetworkManager when it activates the profile,
/// systemd-udevd when the interface appears (boot, hotplug, `udevadm trigger --action=add`).
enum class NetOwner { NetworkManager, SystemdUdevd };
inline constexpr Names<NetOwner, 2> kNetOwnerNames{
    {{NetOwner::NetworkManager, "NetworkManager"}, {NetOwner::SystemdUdevd, "systemd-udevd"}}};
static_assert(checkNames(kNetOwnerNames, NetOwner::SystemdUdevd));
std::string_view toString(NetOwner owner);  // "NetworkManager", "systemd-udevd"

/// Whether a competing owner surely sets the value, or only may (see CompetingOwner::reason).
enum class Certainty { Applies, MayApply };
inline constexpr Names<Certainty, 2> kCertaintyNames{
    {{Certainty::Applies, "applies"}, {Certainty::MayApply, "may-apply"}}};
static_assert(checkNames(kCertaintyNames, Certainty::MayApply));
std::string_view toString(Certainty c);  // "applies", "may-apply"

/// Another program that sets a value iommud changes: it will undo or fight iommud's change.
struct CompetingOwner {
  NetOwner owner = NetOwner::SystemdUdevd;
  ForeignSetting setting;
  Certainty certainty = Certainty::Applies;
  std::string reason;  // why it applies or only may: "interface-name=enp1s0", "Host= is evaluated by ..."
};

/// The competing owners of one NIC's rings, channels and coalescing.
struct NetOwnerReport {
  std::vector<CompetingOwner> owners;  // NetworkManager profiles first, then the .link file(s)
  std::vector<Unreadable> unknown;     // could not be read: they may hold owners too
  std::vector<ForeignIssue> issues;    // skipped lines in the files that apply or may apply

  /// The owners of one setting, by iommud's ethtool name.
  [[nodiscard]] std::vector<CompetingOwner> of(NetSettingKind kind, std::string_view key) const;
};

/// Who else sets this NIC's values. NetworkManager profiles each stand alone; of the .link files
/// only the first that matches applies, so a file after one that may match may only apply too.
NetOwnerReport competingOwners(const NetOwnerSources& sources, const NicIdentity& nic);

/// A hardware address in the lower-case colon form: "AA-BB-CC-DD-EE-FF", "aabb.ccdd.eeff" and
/// "aa:bb:cc:dd:ee:ff" (also 20-byte InfiniBand ones) become "aa:bb:cc:dd:ee:ff"; nullopt otherwise.
std::optional<std::string> normalizeMac(std::string_view text);

}  // namespace iommud::core
