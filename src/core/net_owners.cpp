#include "core/net_owners.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>

#include "core/policy.hpp"
#include "core/text.hpp"

namespace iommud::core {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iEndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == suffix;
}

// No < Maybe < Yes: "all must hold" is the minimum, "any may hold" the maximum.
MatchResult both(MatchResult a, MatchResult b) {
  return std::min(a, b);
}
MatchResult either(MatchResult a, MatchResult b) {
  return std::max(a, b);
}
MatchResult negated(MatchResult r) {
  if (r == MatchResult::Yes) return MatchResult::No;
  if (r == MatchResult::No) return MatchResult::Yes;
  return MatchResult::Maybe;
}

MatchResult fromBool(bool b) {
  return b ? MatchResult::Yes : MatchResult::No;
}

// A verdict made of several conditions: the result is the weakest, the reason the first condition
// that made it so.
class Verdict {
 public:
  void require(MatchResult r, const std::string& why) {
    if (r < result_) {
      result_ = r;
      reason_ = why;
    } else if (r == MatchResult::Yes && result_ == MatchResult::Yes && !why.empty()) {
      reason_ += reason_.empty() ? why : ", " + why;
    }
  }
  [[nodiscard]] MatchResult result() const { return result_; }
  [[nodiscard]] MatchVerdict done() const { return {result_, reason_}; }

 private:
  MatchResult result_ = MatchResult::Yes;
  std::string reason_;
};

std::optional<uint32_t> parseU32(std::string_view s) {
  s = trim(s);
  int base = 10;
  if (s.starts_with("0x") || s.starts_with("0X")) {
    base = 16;
    s.remove_prefix(2);
  }
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// systemd's parse_boolean and GLib/NetworkManager's: the words both accept.
std::optional<uint32_t> parseBool(std::string_view s) {
  std::string w = lower(trim(s));
  if (w == "1" || w == "yes" || w == "y" || w == "true" || w == "t" || w == "on") return 1;
  if (w == "0" || w == "no" || w == "n" || w == "false" || w == "f" || w == "off") return 0;
  return std::nullopt;
}

namespace timespan {

constexpr uint64_t kLimit = std::numeric_limits<uint32_t>::max() * 1000000ULL;  // far above any coalesce value

// One "1.5s" of a timespan: digits, an optional fraction (to nanoseconds) and a unit's name.
struct Term {
  uint64_t whole = 0;
  std::string_view fraction;
  std::string_view unit;
};

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

bool isSpace(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// The term at s[i] (past any space), advancing i; nullopt for a term without digits or too large.
std::optional<Term> nextTerm(std::string_view s, size_t& i) {
  Term t;
  size_t start = i;
  while (i < s.size() && isDigit(s[i])) {
    t.whole = t.whole * 10 + static_cast<uint64_t>(s[i++] - '0');
    if (t.whole > kLimit) return std::nullopt;
  }
  if (i < s.size() && s[i] == '.') {
    size_t f = ++i;
    while (i < s.size() && isDigit(s[i])) ++i;
    t.fraction = s.substr(f, std::min<size_t>(i - f, 9));
  }
  if (i == start) return std::nullopt;
  while (i < s.size() && isSpace(s[i])) ++i;
  size_t u = i;
  while (i < s.size() && !isDigit(s[i]) && !isSpace(s[i])) ++i;
  t.unit = s.substr(u, i - u);
  return t;
}

// Microseconds in one of the unit (seconds without a unit), or nullopt for a unit systemd does not know.
std::optional<uint64_t> unitUsec(std::string_view unitName) {
  struct Unit {
    std::string_view name;
    uint64_t usec;
  };
  static constexpr std::array kUnits = {
      Unit{"seconds", 1000000},     Unit{"second", 1000000},    Unit{"sec", 1000000},     Unit{"s", 1000000},
      Unit{"minutes", 60000000},    Unit{"minute", 60000000},   Unit{"min", 60000000},    Unit{"months", 2629800000000},
      Unit{"month", 2629800000000}, Unit{"M", 2629800000000},   Unit{"msec", 1000},       Unit{"ms", 1000},
      Unit{"m", 60000000},          Unit{"hours", 3600000000},  Unit{"hour", 3600000000}, Unit{"hr", 3600000000},
      Unit{"h", 3600000000},        Unit{"days", 86400000000},  Unit{"day", 86400000000}, Unit{"d", 86400000000},
      Unit{"weeks", 604800000000},  Unit{"week", 604800000000}, Unit{"w", 604800000000},  Unit{"years", 31557600000000},
      Unit{"year", 31557600000000}, Unit{"y", 31557600000000},  Unit{"usec", 1},          Unit{"us", 1},
      Unit{"\xc2\xb5s", 1},         Unit{"\xce\xbcs", 1},
  };
  if (unitName.empty()) return 1000000;
  const auto* it = std::find_if(kUnits.begin(), kUnits.end(), [&](const Unit& x) { return x.name == unitName; });
  if (it == kUnits.end()) return std::nullopt;
  return it->usec;
}

// The term's microseconds, or nullopt past the limit.
std::optional<uint64_t> usecOf(const Term& t, uint64_t mult) {
  if (t.whole > kLimit / mult) return std::nullopt;
  uint64_t scale = 1;
  uint64_t frac = 0;
  for (char c : t.fraction) {
    frac = frac * 10 + static_cast<uint64_t>(c - '0');
    scale *= 10;
  }
  // frac < scale <= 10^9: neither product can overflow.
  return t.whole * mult + (mult >= scale ? frac * (mult / scale) : frac * mult / scale);
}

}  // namespace timespan

// systemd's parse_sec: "50us", "1.5ms", "1s 200ms", a bare number is seconds. Microseconds.
std::optional<uint64_t> parseTimespan(std::string_view s) {
  using namespace timespan;
  s = trim(s);
  if (s.empty()) return std::nullopt;
  uint64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && isSpace(s[i])) ++i;
    if (i == s.size()) break;
    auto term = nextTerm(s, i);
    if (!term) return std::nullopt;
    auto mult = unitUsec(term->unit);
    if (!mult) return std::nullopt;
    auto usec = usecOf(*term, *mult);
    if (!usec) return std::nullopt;
    total += *usec;
    if (total > kLimit) return std::nullopt;
  }
  return total;
}

// Whitespace-separated words; with `unquote`, "..." and '...' group words and lose their quotes.
std::vector<std::string> splitWords(std::string_view s, bool unquote) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i == s.size()) break;
    std::string word;
    char quote = 0;
    for (; i < s.size(); ++i) {
      char c = s[i];
      if (quote != 0) {
        if (c == quote) {
          quote = 0;
        } else if (c == '\\' && i + 1 < s.size()) {
          word += s[++i];
        } else {
          word += c;
        }
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        break;
      } else if (unquote && (c == '"' || c == '\'')) {
        quote = c;
      } else {
        word += c;
      }
    }
    out.push_back(std::move(word));
  }
  return out;
}

// ---- shared: iommud's names for NetworkManager's and systemd's keys --------------------------

const std::vector<EthtoolKey>& keysOf(NetSettingKind kind) {
  switch (kind) {
    case NetSettingKind::Rings: return ringKeys();
    case NetSettingKind::Channels: return channelKeys();
    case NetSettingKind::Coalesce: break;
  }
  return coalesceKeys();
}

void putSetting(std::vector<ForeignSetting>& settings, ForeignSetting s) {
  auto it = std::find_if(settings.begin(), settings.end(),
                         [&](const ForeignSetting& x) { return x.kind == s.kind && x.key == s.key; });
  if (it == settings.end()) {
    settings.push_back(std::move(s));
  } else {
    *it = std::move(s);
  }
}

void dropSetting(std::vector<ForeignSetting>& settings, NetSettingKind kind, std::string_view key) {
  std::erase_if(settings, [&](const ForeignSetting& x) { return x.kind == kind && x.key == key; });
}

// ---- NetworkManager keyfiles -------------------------------------------------------------------

// GLib key-file string escapes: \s \n \t \r \\ (and "\;" inside lists).
std::string keyfileUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    switch (c) {
      case 's': out += ' '; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      default: out += c;
    }
  }
  return out;
}

// A GLib string list: ';'-separated, "\;" is a literal semicolon, a trailing ';' ends the list.
std::vector<std::string> keyfileList(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      cur += s[i];
      cur += s[++i];
    } else if (s[i] == ';') {
      out.push_back(keyfileUnescape(trim(cur)));
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  if (!trim(cur).empty()) out.push_back(keyfileUnescape(trim(cur)));
  std::erase_if(out, [](const std::string& x) { return x.empty(); });
  return out;
}

// mac-address: "AA:BB:CC:DD:EE:FF", or the old form of decimal bytes "170;187;204;221;238;255;".
std::optional<std::string> keyfileMac(std::string_view value) {
  if (value.find(';') == std::string_view::npos) return normalizeMac(value);
  std::string out;
  for (const auto& byte : keyfileList(value)) {
    auto b = parseU32(byte);
    if (!b || *b > 255) return std::nullopt;
    static constexpr std::string_view kHex = "0123456789abcdef";
    if (!out.empty()) out += ':';
    out += kHex[*b >> 4U];
    out += kHex[*b & 0xfU];
  }
  return out.empty() ? std::nullopt : std::optional(out);
}

// [ethtool] keys: "ring-rx", "channels-combined", "coalesce-rx-usecs" are iommud's "rx",
// "combined", "rx-usecs" (nm-settings-nmcli(5), NetworkManager 1.26+).
std::optional<std::pair<NetSettingKind, std::string>> nmEthtoolKey(std::string_view key) {
  struct Prefix {
    std::string_view prefix;
    NetSettingKind kind;
  };
  static constexpr std::array kPrefixes = {Prefix{"ring-", NetSettingKind::Rings},
                                           Prefix{"channels-", NetSettingKind::Channels},
                                           Prefix{"coalesce-", NetSettingKind::Coalesce}};
  for (const auto& p : kPrefixes) {
    if (!key.starts_with(p.prefix)) continue;
    std::string name(key.substr(p.prefix.size()));
    if (findEthtoolKey(keysOf(p.kind), name) == nullptr) return std::nullopt;
    return std::pair{p.kind, name};
  }
  return std::nullopt;
}

std::string canonicalNmGroup(std::string_view group) {
  if (group == "802-3-ethernet") return "ethernet";
  if (group == "802-11-wireless") return "wifi";
  return std::string(group);
}

bool hasMacAddress(std::string_view group) {
  return group == "ethernet" || group == "wifi" || group == "infiniband";
}

void nmIssue(NmProfile& p, int line, const std::string& message) {
  p.issues.push_back({p.path, line, message});
}

void nmConnection(NmProfile& p, std::string_view key, const std::string& value, int line) {
  if (key == "id") {
    p.id = value;
  } else if (key == "uuid") {
    p.uuid = lower(value);
  } else if (key == "type") {
    p.type = canonicalNmGroup(value);
  } else if (key == "interface-name") {
    p.interfaceName = value.empty() ? std::nullopt : std::optional(value);
  } else if (key == "autoconnect") {
    if (auto b = parseBool(value))
      p.autoconnect = *b != 0;
    else
      nmIssue(p, line, "autoconnect=" + value + " is not a boolean, skipped");
  }
}

void nmMatch(NmProfile& p, std::string_view key, std::string_view rawValue) {
  auto list = keyfileList(rawValue);
  if (key == "interface-name")
    p.matchInterfaceName = list;
  else if (key == "driver")
    p.matchDriver = list;
  else if (key == "path")
    p.matchPath = list;
  else if (key == "kernel-command-line")
    p.matchKernelCommandLine = list;
}

void nmEthtool(NmProfile& p, std::string_view key, const std::string& value, int line) {
  auto known = nmEthtoolKey(key);
  if (!known) return;  // features, pause, eee: not iommud's business
  auto [kind, name] = *known;
  const auto* k = findEthtoolKey(keysOf(kind), name);
  auto number = k->type == EthtoolKey::Type::Bool ? parseBool(value) : parseU32(value);
  if (!number) {
    nmIssue(p, line, std::string(key) + "=" + value + " is not a value NetworkManager accepts, skipped");
    dropSetting(p.settings, kind, name);
    return;
  }
  putSetting(p.settings, {kind, name, value, number, p.path, line});
}

void nmAssign(NmProfile& p, const std::string& group, std::string_view key, std::string_view rawValue, int line) {
  std::string value = keyfileUnescape(trim(rawValue));
  if (group == "connection") {
    nmConnection(p, key, value, line);
  } else if (hasMacAddress(group) && key == "mac-address") {
    p.macAddress = keyfileMac(value);
    if (!p.macAddress && !value.empty())
      nmIssue(p, line, "mac-address=" + value + " is not a hardware address, skipped");
  } else if (hasMacAddress(group) && (key == "mac-address-blacklist" || key == "mac-address-denylist")) {
    p.macDenylist.clear();
    for (const auto& m : keyfileList(rawValue)) {
      if (auto n = normalizeMac(m)) p.macDenylist.push_back(*n);
    }
  } else if (group == "match") {
    nmMatch(p, key, rawValue);
  } else if (group == "ethtool") {
    nmEthtool(p, key, value, line);
  }
}

// ---- systemd .link files -----------------------------------------------------------------------

// systemd's string_is_safe() for section names: no control characters, quotes or backslashes.
bool safeSectionName(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < ' ' || u == 0x7f || c == '\\' || c == '"' || c == '\'';
  });
}

enum class LinkParse { Amount, U32, Sec, Bool };
struct LinkKey {
  std::string_view name;
  NetSettingKind kind;
  std::string_view key;
  LinkParse parse;
};
// systemd.link(5) [Link], the same set from v252 (Debian 12) to v257.
constexpr std::array kLinkKeys = {
    LinkKey{"RxBufferSize", NetSettingKind::Rings, "rx", LinkParse::Amount},
    LinkKey{"RxMiniBufferSize", NetSettingKind::Rings, "rx-mini", LinkParse::Amount},
    LinkKey{"RxJumboBufferSize", NetSettingKind::Rings, "rx-jumbo", LinkParse::Amount},
    LinkKey{"TxBufferSize", NetSettingKind::Rings, "tx", LinkParse::Amount},
    LinkKey{"RxChannels", NetSettingKind::Channels, "rx", LinkParse::Amount},
    LinkKey{"TxChannels", NetSettingKind::Channels, "tx", LinkParse::Amount},
    LinkKey{"OtherChannels", NetSettingKind::Channels, "other", LinkParse::Amount},
    LinkKey{"CombinedChannels", NetSettingKind::Channels, "combined", LinkParse::Amount},
    LinkKey{"UseAdaptiveRxCoalesce", NetSettingKind::Coalesce, "adaptive-rx", LinkParse::Bool},
    LinkKey{"UseAdaptiveTxCoalesce", NetSettingKind::Coalesce, "adaptive-tx", LinkParse::Bool},
    LinkKey{"RxCoalesceSec", NetSettingKind::Coalesce, "rx-usecs", LinkParse::Sec},
    LinkKey{"RxCoalesceIrqSec", NetSettingKind::Coalesce, "rx-usecs-irq", LinkParse::Sec},
    LinkKey{"RxCoalesceLowSec", NetSettingKind::Coalesce, "rx-usecs-low", LinkParse::Sec},
    LinkKey{"RxCoalesceHighSec", NetSettingKind::Coalesce, "rx-usecs-high", LinkParse::Sec},
    LinkKey{"TxCoalesceSec", NetSettingKind::Coalesce, "tx-usecs", LinkParse::Sec},
    LinkKey{"TxCoalesceIrqSec", NetSettingKind::Coalesce, "tx-usecs-irq", LinkParse::Sec},
    LinkKey{"TxCoalesceLowSec", NetSettingKind::Coalesce, "tx-usecs-low", LinkParse::Sec},
    LinkKey{"TxCoalesceHighSec", NetSettingKind::Coalesce, "tx-usecs-high", LinkParse::Sec},
    LinkKey{"RxMaxCoalescedFrames", NetSettingKind::Coalesce, "rx-frames", LinkParse::U32},
    LinkKey{"RxMaxCoalescedIrqFrames", NetSettingKind::Coalesce, "rx-frames-irq", LinkParse::U32},
    LinkKey{"RxMaxCoalescedLowFrames", NetSettingKind::Coalesce, "rx-frames-low", LinkParse::U32},
    LinkKey{"RxMaxCoalescedHighFrames", NetSettingKind::Coalesce, "rx-frames-high", LinkParse::U32},
    LinkKey{"TxMaxCoalescedFrames", NetSettingKind::Coalesce, "tx-frames", LinkParse::U32},
    LinkKey{"TxMaxCoalescedIrqFrames", NetSettingKind::Coalesce, "tx-frames-irq", LinkParse::U32},
    LinkKey{"TxMaxCoalescedLowFrames", NetSettingKind::Coalesce, "tx-frames-low", LinkParse::U32},
    LinkKey{"TxMaxCoalescedHighFrames", NetSettingKind::Coalesce, "tx-frames-high", LinkParse::U32},
    LinkKey{"CoalescePacketRateLow", NetSettingKind::Coalesce, "pkt-rate-low", LinkParse::U32},
    LinkKey{"CoalescePacketRateHigh", NetSettingKind::Coalesce, "pkt-rate-high", LinkParse::U32},
    LinkKey{"CoalescePacketRateSampleIntervalSec", NetSettingKind::Coalesce, "sample-interval", LinkParse::Sec},
    LinkKey{"StatisticsBlockCoalesceSec", NetSettingKind::Coalesce, "stats-block-usecs", LinkParse::Sec},
};

// The number udev hands to ethtool, or an error in the words of systemd's own warning.
std::optional<uint32_t> linkNumber(const LinkKey& k, std::string_view value, std::string& error) {
  switch (k.parse) {
    case LinkParse::Amount: {
      // config_parse_ring_buffer_or_channel: "max" or 1..4294967295.
      auto v = parseU32(value);
      if (!v || *v == 0) error = "is not \"max\" or a number from 1";
      return v;
    }
    case LinkParse::U32: {
      auto v = parseU32(value);
      if (!v) error = "is not a number";
      return v;
    }
    case LinkParse::Bool: {
      auto v = parseBool(value);
      if (!v) error = "is not a boolean";
      return v;
    }
    case LinkParse::Sec: break;
  }
  auto usec = parseTimespan(value);
  if (!usec || *usec > std::numeric_limits<uint32_t>::max()) {
    error = "is not a time span up to 4294967295us";
    return std::nullopt;
  }
  bool atLeastOne = k.key == "sample-interval" || k.key == "stats-block-usecs";
  if (atLeastOne && *usec == 0) {
    error = "must not be zero";
    return std::nullopt;
  }
  // ethtool's sample-interval is in seconds; udev rounds partial seconds up.
  if (k.key == "sample-interval") return static_cast<uint32_t>((*usec + 999999) / 1000000);
  return static_cast<uint32_t>(*usec);
}

void linkSetting(LinkFile& f, std::string_view path, const LinkKey& k, const std::string& value, int line) {
  if (value.empty()) {  // an empty assignment resets the key, e.g. in a drop-in
    dropSetting(f.settings, k.kind, k.key);
    return;
  }
  if (k.parse == LinkParse::Amount && value == "max") {
    putSetting(f.settings, {k.kind, std::string(k.key), value, std::nullopt, std::string(path), line});
    return;
  }
  std::string error;
  auto number = linkNumber(k, value, error);
  if (!number || !error.empty()) {
    // udev ignores the assignment and keeps what an earlier one set.
    f.issues.push_back({std::string(path), line, std::string(k.name) + "=" + value + " " + error + ", skipped"});
    return;
  }
  putSetting(f.settings, {k.kind, std::string(k.key), value, number, std::string(path), line});
}

void linkHwAddrs(LinkFile& f, std::string_view path, std::vector<std::string>& list, std::string_view key,
                 const std::string& value, int line) {
  if (value.empty()) {
    list.clear();
    return;
  }
  for (const auto& w : splitWords(value, false)) {
    // config_parse_hw_addrs skips what it cannot parse; IPv4/IPv6-style addresses belong to
    // tunnels and never match a NIC, so skipping them too changes no verdict.
    if (auto mac = normalizeMac(w)) {
      list.push_back(*mac);
    } else {
      f.issues.push_back({std::string(path), line, std::string(key) + "=" + w + " is not a NIC's address, skipped"});
    }
  }
}

// config_parse_match_strv and friends: a leading "!" inverts every word of the line.
void linkPatterns(std::vector<std::string>& list, const std::string& value, bool unquote) {
  if (value.empty()) {
    list.clear();
    return;
  }
  std::string_view v = value;
  bool invert = v.starts_with('!');
  if (invert) v.remove_prefix(1);
  for (auto& w : splitWords(v, unquote)) list.push_back(invert ? "!" + w : std::move(w));
}

void linkCondition(std::vector<std::string>& conditions, std::string_view key, const std::string& value) {
  // Each condition type keeps only its last assignment; an empty one removes it.
  std::string prefix = std::string(key) + "=";
  std::erase_if(conditions, [&](const std::string& c) { return c.starts_with(prefix); });
  if (!value.empty()) conditions.push_back(prefix + value);
}

// [Match] keys with glob lists; only OriginalName= takes words as written (config_parse_match_ifnames).
struct PatternKey {
  std::string_view name;
  std::vector<std::string> LinkMatch::*list;
  bool unquote;
};
constexpr std::array kPatternKeys = {
    PatternKey{"OriginalName", &LinkMatch::originalNames, false},
    PatternKey{"Path", &LinkMatch::paths, true},
    PatternKey{"Driver", &LinkMatch::drivers, true},
    PatternKey{"Type", &LinkMatch::types, true},
    PatternKey{"Kind", &LinkMatch::kinds, true},
    PatternKey{"Property", &LinkMatch::properties, true},
};
// [Match] keys that are conditions on the host, tested when udev loads the file.
constexpr std::array<std::string_view, 7> kConditionKeys = {
    "Host", "Virtualization", "KernelCommandLine", "KernelVersion", "Credential", "Architecture", "Firmware"};

void linkAssign(LinkFile& f, std::string_view path, std::string_view section, std::string_view key,
                const std::string& value, int line) {
  if (section == "Link") {
    const auto* it = std::find_if(kLinkKeys.begin(), kLinkKeys.end(), [&](const LinkKey& k) { return k.name == key; });
    if (it != kLinkKeys.end()) linkSetting(f, path, *it, value, line);
    return;
  }
  if (section != "Match") return;
  auto& m = f.match;
  if (key == "MACAddress") {
    linkHwAddrs(f, path, m.macAddresses, key, value, line);
  } else if (key == "PermanentMACAddress") {
    linkHwAddrs(f, path, m.permanentMacAddresses, key, value, line);
  } else if (const auto* p = std::find_if(kPatternKeys.begin(), kPatternKeys.end(),
                                          [&](const PatternKey& k) { return k.name == key; });
             p != kPatternKeys.end()) {
    linkPatterns(m.*(p->list), value, p->unquote);
  } else if (std::find(kConditionKeys.begin(), kConditionKeys.end(), key) != kConditionKeys.end()) {
    linkCondition(m.conditions, key, value);
  }
}

// systemd's config_parse(): strip, skip '#'/';' comments, join '\'-continued lines, [Section],
// Key=Value. A line without '=' or outside a section is skipped; a bad section header makes udev
// refuse the whole file (parse_line returns -EBADMSG).
void parseLinkText(LinkFile& f, std::string_view path, std::string_view text) {
  auto lines = split(text, '\n');
  auto isComment = [](std::string_view l) { return !l.empty() && (l[0] == '#' || l[0] == ';'); };
  std::string section;
  for (size_t i = 0; i < lines.size(); ++i) {
    int lineNo = static_cast<int>(i) + 1;
    std::string l(trim(lines[i]));
    if (l.empty() || isComment(l)) continue;
    while (!l.empty() && l.back() == '\\') {
      l.back() = ' ';
      size_t j = i + 1;
      while (j < lines.size() && isComment(trim(lines[j]))) ++j;  // comments inside a continuation are dropped
      if (j == lines.size()) break;
      i = j;
      l += std::string(trim(lines[i]));
    }
    l = std::string(trim(l));
    if (l.front() == '[') {
      std::string_view name = std::string_view(l).substr(1, l.size() >= 2 ? l.size() - 2 : 0);
      if (l.back() != ']' || !safeSectionName(name)) {
        f.issues.push_back(
            {std::string(path), lineNo, "invalid section header " + l + ": systemd-udevd refuses the file"});
        f.rejected = true;
        section.clear();
        continue;
      }
      section = std::string(name);
      continue;
    }
    auto eq = l.find('=');
    if (eq == std::string::npos) {
      f.issues.push_back({std::string(path), lineNo, "missing '=', line skipped"});
      continue;
    }
    if (section.empty()) {
      f.issues.push_back({std::string(path), lineNo, "assignment outside of a section, skipped"});
      continue;
    }
    std::string key(trim(std::string_view(l).substr(0, eq)));
    std::string value(trim(std::string_view(l).substr(eq + 1)));
    linkAssign(f, path, section, key, value, lineNo);
  }
}

// ---- matching ----------------------------------------------------------------------------------

bool onlyStars(std::string_view pattern) {
  return !pattern.empty() && pattern.find_first_not_of('*') == std::string_view::npos;
}

// systemd's net_condition_test_strv() over a fact that may be unknown (nullopt) or absent (""):
// any positive pattern must match, no "!" pattern may.
MatchResult testPatterns(const std::vector<std::string>& patterns, const std::optional<std::string>& value,
                         bool alwaysPresent) {
  if (patterns.empty()) return MatchResult::Yes;
  bool hasPositive = false;
  MatchResult positive = MatchResult::No;
  MatchResult negative = MatchResult::Yes;
  for (const auto& p : patterns) {
    std::string_view q = p;
    bool invert = q.starts_with('!');
    if (invert) q.remove_prefix(1);
    MatchResult m = MatchResult::Maybe;
    if (value) {
      m = fromBool(!value->empty() && globMatch(q, *value));
    } else if (alwaysPresent && onlyStars(q)) {
      m = MatchResult::Yes;
    }
    if (invert) {
      negative = both(negative, negated(m));
    } else {
      hasPositive = true;
      positive = either(positive, m);
    }
  }
  return hasPositive ? both(positive, negative) : negative;
}

std::string joined(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& s : list) out += (out.empty() ? "" : " ") + s;
  return out;
}

void requirePatterns(Verdict& v, std::string_view key, const std::vector<std::string>& patterns,
                     const std::optional<std::string>& value, bool alwaysPresent, std::string_view unknownWhy) {
  if (patterns.empty()) return;
  MatchResult r = testPatterns(patterns, value, alwaysPresent);
  std::string what = std::string(key) + "=" + joined(patterns);
  if (r == MatchResult::Maybe) {
    v.require(r, what + ": " + std::string(unknownWhy));
  } else {
    v.require(r, what);
  }
}

void requireHwAddrs(Verdict& v, std::string_view key, const std::vector<std::string>& list,
                    const std::optional<std::string>& mac, std::string_view unknownWhy) {
  if (list.empty()) return;
  std::string what = std::string(key) + "=" + joined(list);
  if (!mac) {
    v.require(MatchResult::Maybe, what + ": " + std::string(unknownWhy));
    return;
  }
  v.require(fromBool(std::find(list.begin(), list.end(), *mac) != list.end()), what);
}

// NetworkManager's nm_wildcard_match_check(): "|x" (default) optional, "&x" mandatory, "!x" is
// "&!x", "\" escapes the next character; any optional one and all mandatory ones must match.
MatchResult nmWildcard(const std::vector<std::string>& patterns, const std::optional<std::string>& value) {
  bool hasOptional = false;
  MatchResult optional = MatchResult::No;
  MatchResult mandatory = MatchResult::Yes;
  for (const auto& raw : patterns) {
    std::string_view p = raw;
    bool isMandatory = false;
    bool explicitOptional = false;
    if (p.starts_with('&')) {
      isMandatory = true;
      p.remove_prefix(1);
    } else if (p.starts_with('|')) {
      explicitOptional = true;
      p.remove_prefix(1);
    }
    bool inverted = p.starts_with('!');
    if (inverted) {
      p.remove_prefix(1);
      if (!explicitOptional) isMandatory = true;
    }
    if (p.starts_with('\\')) p.remove_prefix(1);
    MatchResult m = value ? fromBool(globMatch(p, *value)) : MatchResult::Maybe;
    if (inverted) m = negated(m);
    if (isMandatory) {
      mandatory = both(mandatory, m);
    } else {
      hasOptional = true;
      optional = either(optional, m);
    }
  }
  return both(mandatory, hasOptional ? optional : MatchResult::Yes);
}

// Connection types that describe the device they create (bond, bridge, vlan, ...) never apply to
// a NIC; the physical ones apply to NICs of their link type.
std::optional<std::string_view> nmDeviceType(std::string_view connectionType) {
  if (connectionType == "ethernet") return "ether";
  if (connectionType == "wifi") return "wlan";
  if (connectionType == "infiniband") return "infiniband";
  return std::nullopt;
}

}  // namespace

std::string_view toString(NetSettingKind kind) {
  return nameOf(kNetSettingKindNames, kind);
}

std::string_view toString(NetOwner owner) {
  return nameOf(kNetOwnerNames, owner);
}

std::string_view toString(Certainty c) {
  return nameOf(kCertaintyNames, c);
}

std::optional<std::string> normalizeMac(std::string_view text) {
  text = trim(text);
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  std::vector<std::string> bytes;
  if (std::count(text.begin(), text.end(), '.') == 2) {
    // "aabb.ccdd.eeff": three groups of two bytes.
    for (auto group : split(text, '.')) {
      if (group.size() != 4 || !std::all_of(group.begin(), group.end(), hex)) return std::nullopt;
      bytes.emplace_back(group.substr(0, 2));
      bytes.emplace_back(group.substr(2, 2));
    }
  } else {
    char sep = text.find('-') != std::string_view::npos ? '-' : ':';
    for (auto field : split(text, sep)) {
      if (field.empty() || field.size() > 2 || !std::all_of(field.begin(), field.end(), hex)) return std::nullopt;
      bytes.push_back(field.size() == 1 ? "0" + std::string(field) : std::string(field));
    }
  }
  if (bytes.size() != 6 && bytes.size() != 20) return std::nullopt;
  std::string out;
  for (const auto& b : bytes) out += (out.empty() ? "" : ":") + lower(b);
  return out;
}

NmProfile parseNmKeyfile(std::string_view path, std::string_view text) {
  NmProfile p;
  p.path = std::string(path);
  std::string group;
  int lineNo = 0;
  // GLib refuses the whole file on a line it cannot parse, and NetworkManager with it; iommud reads
  // on but only says "may apply" of such a file.
  auto refuse = [&](const std::string& message) {
    p.issues.push_back({p.path, lineNo, message + ": NetworkManager may refuse the file"});
    p.wellFormed = false;
  };
  for (auto raw : split(text, '\n')) {
    ++lineNo;
    auto l = trim(raw);
    if (l.empty() || l[0] == '#') continue;
    if (l[0] == '[') {
      if (l.back() != ']' || l.size() < 3 || l.substr(1, l.size() - 2).find_first_of("[]") != std::string_view::npos) {
        refuse("invalid group header");
        group.clear();
        continue;
      }
      group = canonicalNmGroup(l.substr(1, l.size() - 2));
      continue;
    }
    auto eq = l.find('=');
    if (eq == std::string_view::npos || trim(l.substr(0, eq)).empty()) {
      refuse("not a key=value pair, group or comment");
      continue;
    }
    if (group.empty()) {
      refuse("key before the first group");
      continue;
    }
    auto key = trim(l.substr(0, eq));
    if (key.find('[') != std::string_view::npos) continue;  // a translation ("name[de]=")
    nmAssign(p, group, key, l.substr(eq + 1), lineNo);
  }
  return p;
}

bool isNmKeyfileName(std::string_view name, bool requireExtension) {
  if (name.empty() || name.front() == '.' || name.back() == '~') return false;
  if (iEndsWith(name, ".pem") || iEndsWith(name, ".der") || name.ends_with(".nmmeta")) return false;
  // mkstemp()'s temporary files of g_file_set_contents(): ".XXXXXX" at the end.
  auto dot = name.rfind('.');
  if (dot != std::string_view::npos && name.size() - dot - 1 == 6 &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(dot) + 1, name.end(),
                  [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; })) {
    return false;
  }
  constexpr std::string_view kExtension = ".nmconnection";
  return !requireExtension || (name.size() > kExtension.size() && name.ends_with(kExtension));
}

std::string nmmetaUuid(std::string_view name) {
  constexpr std::string_view kSuffix = ".nmmeta";
  if (!name.ends_with(kSuffix)) return {};
  auto uuid = name.substr(0, name.size() - kSuffix.size());
  bool shape = uuid.size() == 36 && std::all_of(uuid.begin(), uuid.end(), [](char c) {
                 return c == '-' || std::isxdigit(static_cast<unsigned char>(c)) != 0;
               });
  return shape ? lower(uuid) : std::string();
}

std::vector<NmProfile> effectiveNmProfiles(std::vector<NmCandidate> candidates) {
  // Per UUID the best rank wins; a tombstone wins over profiles of lower priority only.
  std::map<std::string, int> best;  // uuid -> best rank of a profile or tombstone
  std::map<std::string, int> tombstones;
  for (const auto& c : candidates) {
    if (c.profile) {
      if (c.profile->uuid.empty()) continue;
      auto [it, fresh] = best.emplace(c.profile->uuid, c.rank);
      if (!fresh) it->second = std::min(it->second, c.rank);
    } else if (!c.tombstoneUuid.empty()) {
      auto [it, fresh] = tombstones.emplace(c.tombstoneUuid, c.rank);
      if (!fresh) it->second = std::min(it->second, c.rank);
    }
  }
  std::vector<NmProfile> out;
  for (auto& c : candidates) {
    if (!c.profile) continue;
    const auto& uuid = c.profile->uuid;
    if (!uuid.empty()) {
      if (best.at(uuid) != c.rank) continue;
      auto t = tombstones.find(uuid);
      if (t != tombstones.end() && t->second < c.rank) continue;
    }
    out.push_back(std::move(*c.profile));
  }
  std::sort(out.begin(), out.end(), [](const NmProfile& a, const NmProfile& b) { return a.path < b.path; });
  return out;
}

bool LinkMatch::empty() const {
  return macAddresses.empty() && permanentMacAddresses.empty() && originalNames.empty() && paths.empty() &&
         drivers.empty() && types.empty() && kinds.empty() && properties.empty();
}

LinkFile parseLinkFile(std::string_view path, std::string_view text) {
  LinkFile f;
  f.path = std::string(path);
  parseLinkText(f, path, text);
  return f;
}

void applyLinkDropIn(LinkFile& file, std::string_view path, std::string_view text) {
  file.dropIns.emplace_back(path);
  parseLinkText(file, path, text);
}

std::vector<std::string> effectiveConfFiles(const std::vector<ConfDir>& dirs, std::string_view suffix) {
  std::map<std::string, std::string> byName;  // ordered by name, as conf_files_list sorts
  for (const auto& d : dirs) {
    for (const auto& n : d.names) {
      if (n.size() <= suffix.size() || !n.ends_with(suffix) || n.front() == '.') continue;
      byName.emplace(n, d.dir + "/" + n);  // the first (highest-priority) directory wins
    }
  }
  std::vector<std::string> out;
  out.reserve(byName.size());
  for (auto& [name, path] : byName) out.push_back(std::move(path));
  return out;
}

MatchVerdict matchNmProfile(const NmProfile& p, const NicIdentity& nic) {
  Verdict v;
  if (!p.type.empty()) {
    auto deviceType = nmDeviceType(p.type);
    if (!deviceType) return {MatchResult::No, "a " + p.type + " profile configures its own device"};
    if (nic.type && *nic.type != *deviceType) return {MatchResult::No, "a " + p.type + " profile"};
  }
  if (p.interfaceName) {
    v.require(fromBool(*p.interfaceName == nic.name), "interface-name=" + *p.interfaceName);
  }
  if (p.macAddress) {
    // NetworkManager compares mac-address with the permanent address (nm-device-ethernet.c).
    std::string what = "mac-address=" + *p.macAddress;
    if (nic.permanentMac) {
      v.require(fromBool(*nic.permanentMac == *p.macAddress), what);
    } else if (nic.mac && *nic.mac == *p.macAddress) {
      v.require(MatchResult::Yes, what);
    } else {
      v.require(MatchResult::Maybe, what + ": compared with the permanent MAC address, which iommud does not know");
    }
  }
  const auto& mac = nic.permanentMac ? nic.permanentMac : nic.mac;
  if (mac && std::find(p.macDenylist.begin(), p.macDenylist.end(), *mac) != p.macDenylist.end()) {
    v.require(MatchResult::No, "mac-address-denylist has " + *mac);
  }
  auto matchList = [&](std::string_view key, const std::vector<std::string>& list,
                       const std::optional<std::string>& value, std::string_view unknownWhy) {
    if (list.empty()) return;
    MatchResult r = nmWildcard(list, value);
    std::string what = "match." + std::string(key) + "=" + joined(list);
    v.require(r, r == MatchResult::Maybe ? what + ": " + std::string(unknownWhy) : what);
  };
  // Alternative names also count for NetworkManager; sysfs does not show them, so only the name is tried.
  matchList("interface-name", p.matchInterfaceName, nic.name, "");
  matchList("driver", p.matchDriver, nic.driver, "the driver is not known");
  matchList("path", p.matchPath, nic.idPath, "the udev ID_PATH is not known");
  if (!p.matchKernelCommandLine.empty()) {
    v.require(MatchResult::Maybe, "match.kernel-command-line is evaluated by NetworkManager, not by iommud");
  }
  if (v.result() == MatchResult::No) return v.done();
  if (!p.interfaceName && !p.macAddress) {
    v.require(MatchResult::Maybe, "no interface-name or mac-address: NetworkManager may activate it on any " +
                                      std::string(p.type.empty() ? "compatible" : p.type) + " device");
  }
  if (!p.autoconnect) v.require(MatchResult::Maybe, "autoconnect=false: it applies when someone activates it");
  if (!p.wellFormed) v.require(MatchResult::Maybe, "NetworkManager may refuse the file (see its issues)");
  return v.done();
}

MatchVerdict matchLinkFile(const LinkFile& f, const NicIdentity& nic) {
  if (!f.readable) return {MatchResult::Maybe, "it could not be read"};
  if (f.rejected) return {MatchResult::No, "systemd-udevd refuses the file (invalid section header)"};
  // link_load_one() ignores a file without [Match] settings (the man page of v252 says otherwise).
  if (f.match.empty() && f.match.conditions.empty()) return {MatchResult::No, "no [Match] settings: ignored"};
  const auto& m = f.match;
  Verdict v;
  requireHwAddrs(v, "MACAddress", m.macAddresses, nic.mac, "the MAC address is not known");
  requireHwAddrs(v, "PermanentMACAddress", m.permanentMacAddresses, nic.permanentMac,
                 "the permanent MAC address is not known");
  requirePatterns(v, "Path", m.paths, nic.idPath, false, "the udev ID_PATH is not known");
  requirePatterns(v, "Driver", m.drivers, nic.driver, false, "the driver is not known");
  requirePatterns(v, "Type", m.types, nic.type, false, "the device type is not known");
  requirePatterns(v, "Kind", m.kinds, nic.kind, false, "the device kind is not known");
  requirePatterns(v, "OriginalName", m.originalNames, nic.originalName, true,
                  "the interface was renamed; its original kernel name is not known");
  for (const auto& prop : m.properties) {
    std::string_view p = prop;
    bool invert = p.starts_with('!');
    if (invert) p.remove_prefix(1);
    auto eq = p.find('=');
    if (eq == std::string_view::npos) continue;  // udev refuses it too (not an assignment)
    auto known = nic.properties.find(std::string(p.substr(0, eq)));
    MatchResult r =
        known == nic.properties.end() ? MatchResult::Maybe : fromBool(globMatch(p.substr(eq + 1), known->second));
    if (invert) r = negated(r);
    v.require(r, r == MatchResult::Maybe ? "Property=" + prop + ": the udev property is not known to iommud"
                                         : "Property=" + prop);
  }
  for (const auto& c : m.conditions) {
    v.require(MatchResult::Maybe, c.substr(0, c.find('=') + 1) + " is evaluated by systemd-udevd, not by iommud");
  }
  return v.done();
}

std::vector<CompetingOwner> NetOwnerReport::of(NetSettingKind kind, std::string_view key) const {
  std::vector<CompetingOwner> out;
  std::copy_if(owners.begin(), owners.end(), std::back_inserter(out),
               [&](const CompetingOwner& o) { return o.setting.kind == kind && o.setting.key == key; });
  return out;
}

NetOwnerReport competingOwners(const NetOwnerSources& sources, const NicIdentity& nic) {
  NetOwnerReport report;
  report.unknown = sources.unreadable;
  auto add = [&](NetOwner owner, const std::vector<ForeignSetting>& settings, Certainty c, const std::string& why) {
    for (const auto& s : settings) report.owners.push_back({owner, s, c, why});
  };
  for (const auto& p : sources.nmProfiles) {
    auto v = matchNmProfile(p, nic);
    if (v.result == MatchResult::No) continue;
    add(NetOwner::NetworkManager, p.settings, v.result == MatchResult::Yes ? Certainty::Applies : Certainty::MayApply,
        v.reason);
    report.issues.insert(report.issues.end(), p.issues.begin(), p.issues.end());
  }
  // Only the first matching .link file applies: a file that matches for sure ends the search, one
  // that may match leaves later ones possible, but only possible.
  std::string earlierMaybe;
  for (const auto& f : sources.linkFiles) {
    auto v = matchLinkFile(f, nic);
    if (v.result == MatchResult::No) continue;
    report.issues.insert(report.issues.end(), f.issues.begin(), f.issues.end());
    if (v.result == MatchResult::Yes && earlierMaybe.empty()) {
      add(NetOwner::SystemdUdevd, f.settings, Certainty::Applies, "first matching .link file: " + v.reason);
      break;
    }
    std::string why = v.result == MatchResult::Maybe ? v.reason : "matches: " + v.reason;
    if (!earlierMaybe.empty()) why += "; applies only if " + earlierMaybe + " does not match first";
    add(NetOwner::SystemdUdevd, f.settings, Certainty::MayApply, why);
    if (v.result == MatchResult::Yes) break;
    if (earlierMaybe.empty()) earlierMaybe = f.path;
  }
  return report;
}

}  // namespace iommud::core
