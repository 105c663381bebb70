#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/kernel_version.hpp"
#include "core/names.hpp"

namespace iommud::core {

/// Where something was written: a policy file and a 1-based line and column.
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;

  [[nodiscard]] std::string str() const;  // "file:line:col", or "file" when line is 0
  bool operator==(const SourceLoc&) const = default;
};

/// A glob in the shell's syntax (`*`, `?`, `[a-z]`, `[!0-9]`), matched against a whole name.
bool globMatch(std::string_view pattern, std::string_view name);

/// A glob examined once: most policy globs are a literal ("ice") or a literal prefix and one
/// trailing star ("0000:3b:*", "enp*"), and those compare without the general matcher.
class Glob {
 public:
  explicit Glob(std::string pattern);
  [[nodiscard]] bool matches(std::string_view name) const;
  [[nodiscard]] const std::string& str() const { return pattern_; }
  /// What every matching name starts with: the pattern up to its first special character.
  [[nodiscard]] std::string_view literalPrefix() const { return std::string_view(pattern_).substr(0, literal_); }

 private:
  enum class Shape { Literal, Prefix, General };
  std::string pattern_;
  size_t literal_ = 0;  // length of the literal prefix
  Shape shape_ = Shape::General;
};

/// An inclusive range of integers; `group-size = ">=2"` is {2, INT_MAX}.
struct IntRange {
  int min = 0;
  int max = 0;
  [[nodiscard]] bool contains(int v) const { return v >= min && v <= max; }
  [[nodiscard]] std::string str() const;
};

/// Parses "3", ">=2", ">1", "<=4", "<5" or "2..4"; nullopt otherwise.
std::optional<IntRange> parseIntRange(std::string_view text);

/// A PCI class prefix written as 2, 4 or 6 hex digits ("02" network, "0108" NVM, "010802" NVMe).
struct ClassPattern {
  uint32_t value = 0;
  int digits = 6;
  [[nodiscard]] bool matches(uint32_t classCode) const { return (classCode >> (4 * (6 - digits))) == value; }
};
std::optional<ClassPattern> parseClassPattern(std::string_view text);

/// What a rule asks of the device. An absent condition always holds; a list holds when any of its
/// entries matches.
struct DeviceMatch {
  std::vector<uint16_t> vendor, device, subsystemVendor, subsystemDevice;
  std::vector<ClassPattern> classes;
  std::vector<DeviceKind> kinds;
  std::vector<Glob> drivers;
  std::vector<Glob> names;          // over netdev and NVMe controller names
  std::vector<Glob> addresses;      // over PCI addresses
  std::optional<bool> removable;    // the `removable` attribute says "removable"
  std::optional<bool> thunderbolt;  // behind a Thunderbolt/USB4 tunnel
  std::optional<bool> untrusted;    // either of the two: what the kernel treats as untrusted
  std::optional<bool> inUse;
  std::optional<IntRange> groupSize;        // endpoints in the group (bridges not counted)
  std::optional<bool> sharesGroup;          // another endpoint is in the group
  std::vector<DeviceKind> sharesGroupWith;  // another endpoint of one of these kinds is in the group
};

/// What a rule asks of the host.
struct HostMatch {
  std::vector<Vendor> iommu;
  std::vector<std::string> mode;  // HostMode::modeName(): off, identity, DMA, DMA-FQ, unknown
  std::optional<bool> cachingMode, rwbf, npCache;
  std::optional<VersionSet> kernel;  // compared with the upstream version
  std::string kernelText;
  std::vector<std::string> cmdline;        // each present: "key" or "key=value"
  std::vector<std::string> cmdlineAbsent;  // none present
  std::vector<std::string> findings;       // each present and touching the device (or host-wide)
};

/// What the domain-type action asks for: a type or `auto` (the boot default).
enum class DomainRequest { Identity, Dma, DmaFq, Auto };
inline constexpr Names<DomainRequest, 4> kDomainRequestNames{{{DomainRequest::Identity, "identity"},
                                                              {DomainRequest::Dma, "DMA"},
                                                              {DomainRequest::DmaFq, "DMA-FQ"},
                                                              {DomainRequest::Auto, "auto"}}};
static_assert(checkNames(kDomainRequestNames, DomainRequest::Auto));
std::string_view toString(DomainRequest r);
std::optional<DomainRequest> parseDomainRequest(std::string_view text);

/// A ring, channel or coalescing value: a number or the device's maximum.
struct Amount {
  std::optional<uint32_t> value;  // nullopt = "max"
  [[nodiscard]] bool isMax() const { return !value; }
  [[nodiscard]] std::string str() const { return value ? std::to_string(*value) : "max"; }
  bool operator==(const Amount&) const = default;
};

/// A module parameter the rule sets: at runtime through /sys/module, or at load through modprobe.d.
struct ParamSetting {
  enum class At { Runtime, Load };
  static constexpr Names<At, 2> kAtNames{{{At::Runtime, "runtime"}, {At::Load, "load"}}};
  enum class TakesEffect { Now, Probe };  // probe: read by the driver only when it binds
  static constexpr Names<TakesEffect, 2> kTakesEffectNames{{{TakesEffect::Now, "now"}, {TakesEffect::Probe, "probe"}}};
  std::string module;  // empty: the device's driver
  std::string name;
  std::string value;
  At at = At::Runtime;
  bool optional = false;  // a missing parameter is not worth a word
  TakesEffect takesEffect = TakesEffect::Probe;
  SourceLoc where;
};
static_assert(checkNames(ParamSetting::kAtNames, ParamSetting::At::Load));
static_assert(checkNames(ParamSetting::kTakesEffectNames, ParamSetting::TakesEffect::Probe));

enum class RuleMode { Apply, Advise };
inline constexpr Names<RuleMode, 2> kRuleModeNames{{{RuleMode::Apply, "apply"}, {RuleMode::Advise, "advise"}}};
static_assert(checkNames(kRuleModeNames, RuleMode::Advise));
std::string_view toString(RuleMode m);
/// When a rule acts: only when the device has just appeared, or also at start and reload, or at
/// boot before anything holds the device (`iommud --early`, in the initramfs) and when it appears.
enum class When { Hotplug, Always, Boot };
inline constexpr Names<When, 3> kWhenNames{
    {{When::Hotplug, "hotplug"}, {When::Always, "always"}, {When::Boot, "boot"}}};
static_assert(checkNames(kWhenNames, When::Boot));
std::string_view toString(When w);

/// The protection a rule gives up, named so that accepting it is a deliberate act.
enum class Risk { None, Low, Medium, High };
inline constexpr Names<Risk, 4> kRiskNames{
    {{Risk::None, "none"}, {Risk::Low, "low"}, {Risk::Medium, "medium"}, {Risk::High, "high"}}};
static_assert(checkNames(kRiskNames, Risk::High));
std::string_view toString(Risk r);

/// Trade-offs a rule may accept: `no-isolation` (identity), `lazy-invalidation` (DMA-FQ).
enum class Acceptance { NoIsolation, LazyInvalidation };
inline constexpr Names<Acceptance, 2> kAcceptanceNames{
    {{Acceptance::NoIsolation, "no-isolation"}, {Acceptance::LazyInvalidation, "lazy-invalidation"}}};
static_assert(checkNames(kAcceptanceNames, Acceptance::LazyInvalidation));
std::string_view toString(Acceptance a);
std::optional<Acceptance> parseAcceptance(std::string_view text);

/// One rule of a policy file, after validation.
struct Rule {
  std::string name;
  std::string description;
  SourceLoc where;  // the [[rule]] header
  RuleMode mode = RuleMode::Apply;
  std::optional<When> when;  // nullopt: per action (disruptive ones hotplug only)
  std::vector<Acceptance> accepts;
  DeviceMatch device;
  std::vector<DeviceMatch> unless;  // the rule does not apply where all conditions of one entry hold
  HostMatch host;
  bool enabled = true;

  std::optional<DomainRequest> domain;
  SourceLoc domainWhere;
  std::map<std::string, Amount> rings;       // ethtool names: rx, tx, rx-mini, rx-jumbo, rx-buf-len, ...
  std::map<std::string, Amount> channels;    // rx, tx, other, combined
  std::map<std::string, uint32_t> coalesce;  // rx-usecs, tx-usecs, adaptive-rx (0/1), ...
  std::vector<ParamSetting> params;
  std::vector<std::string> overriddenBy;  // "[[override]] at file:line" entries that changed it

  [[nodiscard]] bool accepted(Acceptance a) const;
};

/// A policy file as found in the layers: which one won, which were shadowed or masked.
struct PolicyFile {
  std::string name;  // "50-nvme.toml"
  std::string path;  // the file in force, or the mask (a link to /dev/null or an empty file)
  bool masked = false;
  std::vector<std::string> shadowed;  // lower-layer files of the same name
};

/// Every rule in force, in precedence order (later rules win over earlier ones).
struct PolicySet {
  std::vector<PolicyFile> files;
  std::vector<Rule> rules;
};

/// The ethtool names of what rules may set: the kind of value and the kernel that added it.
struct EthtoolKey {
  enum class Type { Count, CountOrMax, Bool, TcpDataSplit };
  std::string_view name;
  Type type;
  KernelVersion since;
};
/// The key's value as people read it: "on"/"off" for booleans, the tcp-data-split names, else the number.
std::string formatEthtoolValue(EthtoolKey::Type type, uint32_t value);
/// The inverse of formatEthtoolValue: "on" -> 1, "enabled" -> 2, "4096" -> 4096; nullopt otherwise.
std::optional<uint32_t> parseEthtoolValue(EthtoolKey::Type type, std::string_view text);
const EthtoolKey* findEthtoolKey(const std::vector<EthtoolKey>& keys, std::string_view name);
const std::vector<EthtoolKey>& ringKeys();
const std::vector<EthtoolKey>& channelKeys();
const std::vector<EthtoolKey>& coalesceKeys();

}  // namespace iommud::core
