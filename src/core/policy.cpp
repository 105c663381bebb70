#include "core/policy.hpp"

#include <algorithm>
#include <charconv>
#include <climits>

namespace iommud::core {

std::string SourceLoc::str() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

namespace {

// Matches a bracket expression at p[0] == '['; returns the index after ']' or npos when malformed
// (then the '[' is an ordinary character, as in fnmatch).
size_t matchBracket(std::string_view p, char c, bool& matched) {
  size_t i = 1;
  bool negate = i < p.size() && (p[i] == '!' || p[i] == '^');
  if (negate) ++i;
  bool hit = false;
  bool first = true;
  for (; i < p.size(); ++i) {
    if (p[i] == ']' && !first) {
      matched = hit != negate;
      return i + 1;
    }
    first = false;
    char lo = p[i];
    if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      if (c >= lo && c <= p[i + 2]) hit = true;
      i += 2;
    } else if (c == lo) {
      hit = true;
    }
  }
  return std::string_view::npos;
}

}  // namespace

bool globMatch(std::string_view pattern, std::string_view name) {
  // Iterative matcher with one backtrack point for the last '*': linear in practice.
  size_t p = 0;
  size_t n = 0;
  size_t starP = std::string_view::npos;
  size_t starN = 0;
  while (n < name.size()) {
    if (p < pattern.size()) {
      char pc = pattern[p];
      if (pc == '*') {
        starP = p++;
        starN = n;
        continue;
      }
      if (pc == '?') {
        ++p;
        ++n;
        continue;
      }
      if (pc == '[') {
        bool matched = false;
        size_t next = matchBracket(pattern.substr(p), name[n], matched);
        if (next != std::string_view::npos) {
          if (matched) {
            p += next;
            ++n;
            continue;
          }
        } else if (name[n] == '[') {
          ++p;
          ++n;
          continue;
        }
      } else if (pc == '\\' && p + 1 < pattern.size() && pattern[p + 1] == name[n]) {
        p += 2;
        ++n;
        continue;
      } else if (pc == name[n]) {
        ++p;
        ++n;
        continue;
      }
    }
    if (starP == std::string_view::npos) return false;
    p = starP + 1;
    n = ++starN;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Glob::Glob(std::string pattern)
    : pattern_(std::move(pattern)), literal_(std::min(pattern_.find_first_of("*?[\\"), pattern_.size())) {
  if (literal_ == pattern_.size()) {
    shape_ = Shape::Literal;
  } else if (literal_ == pattern_.size() - 1 && pattern_[literal_] == '*') {
    shape_ = Shape::Prefix;
  }
}

bool Glob::matches(std::string_view name) const {
  switch (shape_) {
    case Shape::Literal: return name == pattern_;
    case Shape::Prefix: return name.starts_with(literalPrefix());
    case Shape::General: break;
  }
  return globMatch(pattern_, name);
}

std::string IntRange::str() const {
  if (min == max) return std::to_string(min);
  if (max == INT_MAX) return ">=" + std::to_string(min);
  if (min == 0) return "<=" + std::to_string(max);
  return std::to_string(min) + ".." + std::to_string(max);
}

namespace {

std::optional<int> parseNonNegative(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<IntRange> parseIntRange(std::string_view text) {
  auto num = [](std::string_view s) { return parseNonNegative(s); };
  if (auto dots = text.find(".."); dots != std::string_view::npos) {
    auto lo = num(text.substr(0, dots));
    auto hi = num(text.substr(dots + 2));
    if (!lo || !hi || *lo > *hi) return std::nullopt;
    return IntRange{*lo, *hi};
  }
  std::optional<int> v;
  if (text.starts_with(">=") && (v = num(text.substr(2)))) return IntRange{*v, INT_MAX};
  if (text.starts_with("<=") && (v = num(text.substr(2)))) return IntRange{0, *v};
  if (text.starts_with(">") && (v = num(text.substr(1))) && *v < INT_MAX) return IntRange{*v + 1, INT_MAX};
  if (text.starts_with("<") && (v = num(text.substr(1))) && *v > 0) return IntRange{0, *v - 1};
  if ((v = num(text))) return IntRange{*v, *v};
  return std::nullopt;
}

std::optional<ClassPattern> parseClassPattern(std::string_view text) {
  if (text.size() != 2 && text.size() != 4 && text.size() != 6) return std::nullopt;
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return ClassPattern{v, static_cast<int>(text.size())};
}

std::string_view toString(DomainRequest r) {
  return nameOf(kDomainRequestNames, r);
}

std::optional<DomainRequest> parseDomainRequest(std::string_view text) {
  return valueNamed(kDomainRequestNames, text);
}

std::string_view toString(RuleMode m) {
  return nameOf(kRuleModeNames, m);
}
std::string_view toString(When w) {
  return nameOf(kWhenNames, w);
}

std::string_view toString(Risk r) {
  return nameOf(kRiskNames, r);
}

std::string_view toString(Acceptance a) {
  return nameOf(kAcceptanceNames, a);
}

std::optional<Acceptance> parseAcceptance(std::string_view text) {
  return valueNamed(kAcceptanceNames, text);
}

bool Rule::accepted(Acceptance a) const {
  return std::find(accepts.begin(), accepts.end(), a) != accepts.end();
}

std::string formatEthtoolValue(EthtoolKey::Type type, uint32_t value) {
  switch (type) {
    case EthtoolKey::Type::Bool: return value != 0 ? "on" : "off";
    case EthtoolKey::Type::TcpDataSplit:
      // ETHTOOL_TCP_DATA_SPLIT_{UNKNOWN,DISABLED,ENABLED}; UNKNOWN in a request means "auto".
      if (value == 1) return "disabled";
      if (value == 2) return "enabled";
      return "auto";
    case EthtoolKey::Type::Count:
    case EthtoolKey::Type::CountOrMax: break;
  }
  return std::to_string(value);
}

std::optional<uint32_t> parseEthtoolValue(EthtoolKey::Type type, std::string_view text) {
  for (uint32_t v = 0; v <= 2; ++v) {
    if (type != EthtoolKey::Type::Count && type != EthtoolKey::Type::CountOrMax &&
        text == formatEthtoolValue(type, v)) {
      return v;
    }
  }
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

const EthtoolKey* findEthtoolKey(const std::vector<EthtoolKey>& keys, std::string_view name) {
  for (const auto& k : keys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

const std::vector<EthtoolKey>& ringKeys() {
  using T = EthtoolKey::Type;
  static const std::vector<EthtoolKey> keys = {
      {"rx", T::CountOrMax, {5, 7, 0}},          {"rx-mini", T::CountOrMax, {5, 7, 0}},
      {"rx-jumbo", T::CountOrMax, {5, 7, 0}},    {"tx", T::CountOrMax, {5, 7, 0}},
      {"rx-buf-len", T::Count, {5, 17, 0}},      {"tcp-data-split", T::TcpDataSplit, {5, 18, 0}},
      {"cqe-size", T::Count, {5, 17, 0}},        {"tx-push", T::Bool, {5, 17, 0}},
      {"rx-push", T::Bool, {6, 3, 0}},           {"tx-push-buf-len", T::CountOrMax, {6, 4, 0}},
      {"hds-thresh", T::CountOrMax, {6, 14, 0}},
  };
  return keys;
}

const std::vector<EthtoolKey>& channelKeys() {
  using T = EthtoolKey::Type;
  static const std::vector<EthtoolKey> keys = {
      {"rx", T::CountOrMax, {5, 7, 0}},
      {"tx", T::CountOrMax, {5, 7, 0}},
      {"other", T::CountOrMax, {5, 7, 0}},
      {"combined", T::CountOrMax, {5, 7, 0}},
  };
  return keys;
}

const std::vector<EthtoolKey>& coalesceKeys() {
  using T = EthtoolKey::Type;
  static const std::vector<EthtoolKey> keys = {
      {"rx-usecs", T::Count, {5, 7, 0}},           {"rx-frames", T::Count, {5, 7, 0}},
      {"rx-usecs-irq", T::Count, {5, 7, 0}},       {"rx-frames-irq", T::Count, {5, 7, 0}},
      {"tx-usecs", T::Count, {5, 7, 0}},           {"tx-frames", T::Count, {5, 7, 0}},
      {"tx-usecs-irq", T::Count, {5, 7, 0}},       {"tx-frames-irq", T::Count, {5, 7, 0}},
      {"stats-block-usecs", T::Count, {5, 7, 0}},  {"adaptive-rx", T::Bool, {5, 7, 0}},
      {"adaptive-tx", T::Bool, {5, 7, 0}},         {"pkt-rate-low", T::Count, {5, 7, 0}},
      {"rx-usecs-low", T::Count, {5, 7, 0}},       {"rx-frames-low", T::Count, {5, 7, 0}},
      {"tx-usecs-low", T::Count, {5, 7, 0}},       {"tx-frames-low", T::Count, {5, 7, 0}},
      {"pkt-rate-high", T::Count, {5, 7, 0}},      {"rx-usecs-high", T::Count, {5, 7, 0}},
      {"rx-frames-high", T::Count, {5, 7, 0}},     {"tx-usecs-high", T::Count, {5, 7, 0}},
      {"tx-frames-high", T::Count, {5, 7, 0}},     {"sample-interval", T::Count, {5, 7, 0}},
      {"cqe-mode-rx", T::Bool, {5, 15, 0}},        {"cqe-mode-tx", T::Bool, {5, 15, 0}},
      {"tx-aggr-max-bytes", T::Count, {6, 0, 0}},  {"tx-aggr-max-frames", T::Count, {6, 0, 0}},
      {"tx-aggr-time-usecs", T::Count, {6, 0, 0}},
  };
  return keys;
}

}  // namespace iommud::core
