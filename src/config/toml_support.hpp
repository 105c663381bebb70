#pragma once

// What the TOML files of src/config (the policies, iommud.conf) share once read (reading them:
// config_file.hpp): the checks before toml11 sees a text, its syntax errors as one located line,
// and checks of values that report and go on. Internal to iommud_config, the only library that sees toml11.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <toml.hpp>
#include <vector>

#include "config/line_index.hpp"
#include "config/policy_loader.hpp"
#include "core/names.hpp"
#include "core/result.hpp"

namespace iommud::config::detail {

/// What a kind of file is called in the messages of the pre-checks, how large and deeply nested
/// it may be, and how many keys one line may hold.
struct TextRules {
  size_t maxBytes = 0;
  int maxNesting = 0;
  int maxKeysPerLine = 0;
  std::string_view files;       // "policy files": "...; policy files are UTF-8 text"
  std::string_view neverNeeds;  // "policies never need that", after the nesting limit
};

/// Size, UTF-8, control characters, nesting and keys per line, then toml11. The document, or nothing and the
/// one error (a syntax error located at the place toml11 gave up) appended to `out`.
std::optional<toml::value> parseToml(std::string_view text, const std::string& fileName, const TextRules& rules,
                                     std::vector<Diagnostic>& out);

/// "an integer", "a table", ...: what a message says a value is.
std::string typeName(const toml::value& v);
/// "a, b, c".
std::string joinNames(const std::vector<std::string_view>& names);

/// Checks the values of one file, reporting each problem into `out` and going on, so that one
/// run lists every mistake. Parsers of a kind of file derive from it.
class Checker {
 public:
  /// `text` is what toml11 parsed: the values' positions are offsets into it.
  Checker(const std::string& file, std::string_view text, std::vector<Diagnostic>& out)
      : file_(file), lines_(text), out_(out) {}

  /// Sorts the diagnostics by position (they are found in toml11's table order) and says how
  /// many did not fit in the report.
  void finish();

 protected:
  using Handler = std::function<void(const std::string&, const toml::value&)>;

  // Once the report is full, nothing more is located.
  [[nodiscard]] bool full() const { return out_.size() >= kMaxDiagnostics; }
  [[nodiscard]] core::SourceLoc loc(const toml::value& v) const;
  // toml11 keeps no location for keys; find the key on the value's line, left of the value.
  [[nodiscard]] core::SourceLoc keyLoc(const toml::value& v, const std::string& key) const;

  void report(core::SourceLoc where, Diagnostic::Severity sev, std::string message);
  void error(const toml::value& v, std::string message) {
    report(loc(v), Diagnostic::Severity::Error, std::move(message));
  }
  void errorAt(core::SourceLoc where, std::string message) {
    report(std::move(where), Diagnostic::Severity::Error, std::move(message));
  }
  void warning(const toml::value& v, std::string message) {
    report(loc(v), Diagnostic::Severity::Warning, std::move(message));
  }
  [[nodiscard]] size_t errorCount() const { return errors_; }

  // Calls `handle` for each key of a table; unknown keys are errors that list what is allowed
  // there. Not in file order (toml11's tables are hashed): finish() sorts the diagnostics.
  void forEachKey(const toml::value& table, const std::string& where, const std::vector<std::string_view>& allowed,
                  const Handler& handle);

  std::optional<std::string> string(const toml::value& v, const std::string& key);
  std::optional<bool> boolean(const toml::value& v, const std::string& key);
  std::optional<int64_t> integer(const toml::value& v, const std::string& key, int64_t min, int64_t max);

  template <class E>
  std::optional<E> enumValue(const toml::value& v, const std::string& key, const std::vector<std::string_view>& names,
                             const std::function<std::optional<E>(std::string_view)>& parse) {
    auto s = string(v, key);
    if (!s) return std::nullopt;
    if (auto e = parse(*s)) return e;
    error(v, "'" + key + "' is \"" + *s + "\"; expected one of: " + joinNames(names));
    return std::nullopt;
  }

  /// An enum's value by the names of its one table (core/names.hpp), every one of them accepted.
  template <class E, std::size_t N>
  std::optional<E> enumValue(const toml::value& v, const std::string& key, const core::Names<E, N>& table) {
    std::vector<std::string_view> names;
    names.reserve(N);
    for (const auto& entry : table) names.push_back(entry.second);
    return enumValue<E>(v, key, names, [&](std::string_view s) { return core::valueNamed(table, s); });
  }

 private:
  const std::string& file_;
  LineIndex lines_;
  std::vector<Diagnostic>& out_;
  size_t errors_ = 0;
  size_t dropped_ = 0;
};

/// Parses `text` and, when toml11 could read it, has a `Parser` (a Checker with
/// `parseTop(const toml::value&, Result&)`) convert it into `result`, with every diagnostic in
/// `out` in file order.
template <class Parser, class Result>
void parseWith(std::string_view text, const std::string& fileName, const TextRules& rules, Result& result,
               std::vector<Diagnostic>& out) {
  auto top = parseToml(text, fileName, rules, out);
  if (!top) return;
  Parser parser(fileName, text, out);
  parser.parseTop(*top, result);
  parser.finish();
}

}  // namespace iommud::config::detail
