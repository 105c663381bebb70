#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/file_opener.hpp"
#include "core/policy.hpp"

namespace iommud::config {

/// A problem in a policy file, located to the character where possible.
struct Diagnostic {
  enum class Severity { Error, Warning };
  core::SourceLoc where;
  Severity severity = Severity::Error;
  std::string message;

  /// "FILE:LINE:COL: error: MESSAGE": the one line `iommuctl check` prints and the daemon logs.
  [[nodiscard]] std::string str() const;
};

/// A [[override]] entry: changes to a rule defined earlier in the order.
struct Override {
  std::string rule;
  core::SourceLoc where;
  std::optional<core::RuleMode> mode;
  std::optional<core::When> when;
  std::optional<std::vector<core::Acceptance>> accepts;
  std::optional<bool> enabled;
};

/// One file's rules and overrides, and everything wrong with it.
struct ParsedFile {
  std::vector<core::Rule> rules;
  std::vector<Override> overrides;
  std::vector<Diagnostic> diagnostics;
};

/// Largest policy file accepted, and deepest nesting of arrays, inline tables and dotted keys
/// (toml11 3.7 recurses without limit, so a small file of nested brackets would overflow the
/// stack).
inline constexpr size_t kMaxPolicyBytes = 256U << 10U;
inline constexpr int kMaxPolicyNesting = 16;
/// Most keys on one line (inline tables), in policies and iommud.conf: toml11 3.7 copies the
/// whole line for each bare key it reads, so many keys on one long line cost the square of its
/// length; with this limit a file's parse is linear in its size.
inline constexpr int kMaxKeysPerLine = 64;
/// At most this many basic strings ("...") on one line of a policy file or iommud.conf: toml11 3.x
/// copies the whole line for each one it parses, so a line of thousands takes seconds (a 256 KiB
/// line of "ab", 24 s); with the limit a file at its size cap parses in milliseconds. Literal
/// strings ('...') cost nothing of the kind, and an array's items may stand on lines of their own.
inline constexpr int kMaxBasicStringsPerLine = 128;
/// Rules (or overrides) in one file, and diagnostics reported for one file.
inline constexpr size_t kMaxEntriesPerFile = 1000;
inline constexpr size_t kMaxDiagnostics = 100;

/// Parses, validates and converts one policy file's text; `fileName` names it in diagnostics.
/// Pure: no I/O. Reports every semantic error, and the first syntax error.
ParsedFile parsePolicyText(std::string_view text, const std::string& fileName);

/// The result of loading a set of policies: usable only when there is no error.
struct Loaded {
  core::PolicySet policies;
  std::vector<Diagnostic> diagnostics;
  [[nodiscard]] bool ok() const;
  [[nodiscard]] size_t errors() const;
};

/// Joins parsed files (already in precedence order) into one set: rule names must be unique, and
/// overrides change rules defined before them.
Loaded combine(std::vector<core::PolicyFile> files, std::vector<ParsedFile> parsed);

/// The layers, highest precedence first: admin, runtime, shipped.
std::vector<std::string> defaultPolicyDirs();
/// The host's own layers, admin and runtime (read under `--root` when one is given).
std::vector<std::string> hostPolicyDirs();
/// The shipped layer, which belongs to the program, not to the host: `../share/iommud/policies`
/// beside the running executable's directory when that exists (a build tree, where CMake links it
/// to the source tree's policies/, or a relocated install), else the install's datadir.
std::string shippedPolicyDir();
/// Where the install puts the shipped layer (what shippedPolicyDir() says when installed).
std::string installedPolicyDir();

struct LoadOptions {
  /// When set (running as root: 0), files and their directories must be owned by this uid and
  /// not writable by group or others, as sshd's StrictModes.
  std::optional<unsigned> requireOwner;
  /// What opens the layers, their files and their directories: the host's, or, under --root, one
  /// that opens what lies in the root inside it, so that a link never leads out of it.
  FileOpener opener = openOnHost;
};

/// Loads the `*.toml` files of `dirs` (highest precedence first): a file replaces lower-layer
/// files of the same name, a link to /dev/null or an empty file masks them, and the winners are
/// read in lexical order of their names. `files` are read as well, as if in the highest layer.
/// Missing directories are normal.
Loaded loadPolicyFiles(const std::vector<std::string>& dirs, const std::vector<std::string>& files,
                       const LoadOptions& options);

}  // namespace iommud::config
