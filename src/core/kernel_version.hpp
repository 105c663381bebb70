#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/names.hpp"
#include "core/result.hpp"

namespace iommud::core {

/// An upstream kernel version, major.minor.patch (patch 0 when absent).
struct KernelVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;

  auto operator<=>(const KernelVersion&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 bug
  [[nodiscard]] std::string str() const;
};

/// Parses "6.1", "6.1.192", and release strings that start with a version ("6.1.0-56-amd64",
/// "5.15.0-91-generic", "6.18.44-fc-v595"). Trailing text after the numbers is ignored.
std::optional<KernelVersion> parseKernelVersion(std::string_view text);

/// Where the upstream version came from: distribution release strings hide it.
enum class VersionSource { ProcVersion, VersionSignature, Release, Unknown };
inline constexpr Names<VersionSource, 4> kVersionSourceNames{{{VersionSource::ProcVersion, "proc_version"},
                                                              {VersionSource::VersionSignature, "version_signature"},
                                                              {VersionSource::Release, "release"},
                                                              {VersionSource::Unknown, "unknown"}}};
static_assert(checkNames(kVersionSourceNames, VersionSource::Unknown));
std::string_view toString(VersionSource source);

struct UpstreamVersion {
  std::optional<KernelVersion> version;
  VersionSource source = VersionSource::Unknown;
};

/// Finds the upstream version behind a distribution kernel. Debian puts it at the end of
/// /proc/version ("... Debian 6.1.192-2 (2025-...)"), Ubuntu in /proc/version_signature
/// ("Ubuntu 5.15.0-91.101-generic 5.15.131"); otherwise the release string is the best guess.
UpstreamVersion upstreamVersion(std::string_view release, std::string_view procVersion,
                                std::string_view versionSignature);

/// A union of half-open version intervals: ">=6.10,<6.12.43 || >=6.13,<6.15.11".
class VersionSet {
 public:
  struct Bound {
    enum class Op { Lt, Le, Gt, Ge, Eq } op;
    KernelVersion version;
  };
  using Conjunction = std::vector<Bound>;

  /// Parses the union syntax; the error message names the offending column (1-based).
  static Result<VersionSet> parse(std::string_view text);

  [[nodiscard]] bool contains(const KernelVersion& v) const;
  [[nodiscard]] const std::vector<Conjunction>& alternatives() const { return alternatives_; }

 private:
  std::vector<Conjunction> alternatives_;
};

}  // namespace iommud::core
