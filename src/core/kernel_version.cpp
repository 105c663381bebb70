#include "core/kernel_version.hpp"

#include <cctype>
#include <charconv>

#include "core/text.hpp"

namespace iommud::core {
namespace {

bool isDigit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// Reads a decimal number at text[pos], advancing pos; nullopt if none or out of range.
std::optional<int> readNumber(std::string_view text, size_t& pos) {
  size_t end = pos;
  while (end < text.size() && isDigit(text[end]) && end - pos < 6) ++end;
  if (end == pos || (end < text.size() && isDigit(text[end]))) return std::nullopt;
  int value = 0;
  std::from_chars(text.data() + pos, text.data() + end, value);
  pos = end;
  return value;
}

// Parses "X.Y[.Z]" at text[pos]; advances pos past what it used.
std::optional<KernelVersion> readVersion(std::string_view text, size_t& pos) {
  size_t p = pos;
  auto major = readNumber(text, p);
  if (!major || p >= text.size() || text[p] != '.') return std::nullopt;
  ++p;
  auto minor = readNumber(text, p);
  if (!minor) return std::nullopt;
  KernelVersion v{*major, *minor, 0};
  if (p + 1 < text.size() && text[p] == '.' && isDigit(text[p + 1])) {
    ++p;
    auto patch = readNumber(text, p);
    if (!patch) return std::nullopt;
    v.patch = *patch;
  }
  pos = p;
  return v;
}

}  // namespace

std::string KernelVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::optional<KernelVersion> parseKernelVersion(std::string_view text) {
  text = trim(text);
  size_t pos = 0;
  return readVersion(text, pos);
}

std::string_view toString(VersionSource source) {
  return nameOf(kVersionSourceNames, source);
}

UpstreamVersion upstreamVersion(std::string_view release, std::string_view procVersion,
                                std::string_view versionSignature) {
  // Ubuntu: "Ubuntu 5.15.0-91.101-generic 5.15.131" -> the last field is upstream.
  if (auto sig = trim(versionSignature); !sig.empty()) {
    auto space = sig.rfind(' ');
    if (space != std::string_view::npos) {
      if (auto v = parseKernelVersion(sig.substr(space + 1))) {
        return {v, VersionSource::VersionSignature};
      }
    }
  }
  // Debian: "... (gcc-12 (Debian 12.2.0-14) ...) #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2 (2025-07-24)": the
  // compiler's version also follows "Debian ", so the last match is the kernel's.
  std::optional<KernelVersion> debian;
  for (size_t at = procVersion.find("Debian "); at != std::string_view::npos;
       at = procVersion.find("Debian ", at + 1)) {
    size_t pos = at + 7;
    if (auto v = readVersion(procVersion, pos); v && pos < procVersion.size() && procVersion[pos] == '-') debian = v;
  }
  if (debian) return {debian, VersionSource::ProcVersion};
  if (auto v = parseKernelVersion(release)) return {v, VersionSource::Release};
  return {};
}

Result<VersionSet> VersionSet::parse(std::string_view text) {
  VersionSet set;
  size_t pos = 0;
  auto fail = [&](const std::string& what) -> Error {
    return Error{0, {}, "column " + std::to_string(pos + 1) + ": " + what};
  };
  auto skipSpace = [&] {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  };
  Conjunction current;
  for (;;) {
    skipSpace();
    Bound bound{Bound::Op::Eq, {}};
    if (text.substr(pos, 2) == ">=") {
      bound.op = Bound::Op::Ge, pos += 2;
    } else if (text.substr(pos, 2) == "<=") {
      bound.op = Bound::Op::Le, pos += 2;
    } else if (text.substr(pos, 2) == "==") {
      bound.op = Bound::Op::Eq, pos += 2;
    } else if (text.substr(pos, 1) == ">") {
      bound.op = Bound::Op::Gt, pos += 1;
    } else if (text.substr(pos, 1) == "<") {
      bound.op = Bound::Op::Lt, pos += 1;
    } else if (text.substr(pos, 1) == "=") {
      bound.op = Bound::Op::Eq, pos += 1;
    } else if (pos < text.size() && isDigit(text[pos])) {
      bound.op = Bound::Op::Eq;
    } else {
      return fail(pos >= text.size() ? "expected a version bound such as >=6.10, found the end"
                                     : "expected a version bound such as >=6.10");
    }
    skipSpace();
    auto v = readVersion(text, pos);
    if (!v) return fail("expected a kernel version such as 6.12.43");
    bound.version = *v;
    current.push_back(bound);
    skipSpace();
    if (pos >= text.size()) break;
    if (text[pos] == ',') {
      ++pos;
      continue;
    }
    if (text.substr(pos, 2) == "||") {
      pos += 2;
      set.alternatives_.push_back(std::move(current));
      current.clear();
      continue;
    }
    return fail("expected ',' or '||' between version bounds");
  }
  set.alternatives_.push_back(std::move(current));
  return set;
}

bool VersionSet::contains(const KernelVersion& v) const {
  for (const auto& conj : alternatives_) {
    bool all = true;
    for (const auto& b : conj) {
      bool holds = false;
      switch (b.op) {
        case Bound::Op::Lt: holds = v < b.version; break;
        case Bound::Op::Le: holds = v <= b.version; break;
        case Bound::Op::Gt: holds = v > b.version; break;
        case Bound::Op::Ge: holds = v >= b.version; break;
        case Bound::Op::Eq: holds = v == b.version; break;
      }
      if (!holds) {
        all = false;
        break;
      }
    }
    if (all) return true;
  }
  return false;
}

}  // namespace iommud::core
