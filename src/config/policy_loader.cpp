#include "config/policy_loader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <sstream>
#include <toml.hpp>

#include "core/findings.hpp"
#include "core/text.hpp"

namespace iommud::config {

using core::SourceLoc;
using Severity = Diagnostic::Severity;

std::string Diagnostic::str() const {
  // One line per diagnostic, whatever a quoted value held.
  std::string text = where.str() + (severity == Severity::Error ? ": error: " : ": warning: ");
  for (char c : message) {
    if (c == '\n')
      text += "\\n";
    else if (c == '\t')
      text += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20U)
      text += '?';
    else
      text += c;
  }
  return text;
}

bool Loaded::ok() const {
  return errors() == 0;
}

size_t Loaded::errors() const {
  return static_cast<size_t>(std::count_if(diagnostics.begin(), diagnostics.end(),
                                           [](const Diagnostic& d) { return d.severity == Severity::Error; }));
}

namespace {

// Length of a valid UTF-8 sequence at text[i], or 0 (overlong forms and surrogates are invalid).
size_t utf8Length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0U; };
  unsigned c = byte(i);
  auto cont = [&](size_t k) { return (byte(k) & 0xC0U) == 0x80U; };
  if (c < 0x80U) return 1;
  if (c >= 0xC2U && c <= 0xDFU) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0U && c <= 0xEFU) {
    unsigned c1 = byte(i + 1);
    if ((c == 0xE0U && c1 < 0xA0U) || (c == 0xEDU && c1 >= 0xA0U)) return 0;
    return cont(i + 1) && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0U && c <= 0xF4U) {
    unsigned c1 = byte(i + 1);
    if ((c == 0xF0U && c1 < 0x90U) || (c == 0xF4U && c1 >= 0x90U)) return 0;
    return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

// What toml11 3.7 must never see: bytes that are not UTF-8 or are control characters (its
// UTF-8 paths assert and throw from deep inside), and nesting deeper than kMaxPolicyNesting of
// '[', '{' or dotted keys outside strings and comments (it recurses without limit). One pass;
// the first problem is returned with its 1-based line and column.
std::optional<Diagnostic> precheck(std::string_view text, const std::string& file) {
  int depth = 0;
  int dots = 0;
  int line = 1;
  int col = 0;
  auto at = [&](std::string message) {
    return Diagnostic{SourceLoc{file, line, col}, Severity::Error, std::move(message)};
  };
  enum class In { Code, Comment, Basic, Literal, MlBasic, MlLiteral } in = In::Code;
  // A multi-line string closes at the last three quotes of a run of three to five.
  auto closes = [&](size_t& i, char q) {
    size_t run = 0;
    while (i + run < text.size() && text[i + run] == q && run < 5) ++run;
    if (run < 3) return false;
    i += run - 1;
    col += static_cast<int>(run) - 1;
    return true;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++col;
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80U) {
      size_t n = utf8Length(text, i);
      if (n == 0) return at(fmt::format("not valid UTF-8 (byte 0x{:02x}); policy files are UTF-8 text", u));
      i += n - 1;
      if (in == In::Code) return at("a character outside ASCII outside a string or comment");
      continue;
    }
    if (c == '\n') {
      ++line;
      col = 0;
      dots = 0;
      if (in == In::Comment || in == In::Basic || in == In::Literal) in = In::Code;
      continue;
    }
    if ((u < 0x20U && c != '\t' && c != '\r') || u == 0x7FU) {
      return at(fmt::format("control character 0x{:02x}; policy files are text", u));
    }
    switch (in) {
      case In::Comment: continue;
      case In::Basic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
          ++i;
          ++col;
        } else if (c == '"') {
          in = In::Code;
        }
        continue;
      case In::Literal:
        if (c == '\'') in = In::Code;
        continue;
      case In::MlBasic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {  // a line-ending backslash is no escape
          ++i;
          ++col;
        } else if (c == '"' && closes(i, '"')) {
          in = In::Code;
        }
        continue;
      case In::MlLiteral:
        if (c == '\'' && closes(i, '\'')) in = In::Code;
        continue;
      case In::Code: break;
    }
    if (c == '#') {
      in = In::Comment;
    } else if (text.substr(i, 3) == R"(""")") {
      in = In::MlBasic;
      i += 2;
      col += 2;
    } else if (text.substr(i, 3) == "'''") {
      in = In::MlLiteral;
      i += 2;
      col += 2;
    } else if (c == '"') {
      in = In::Basic;
    } else if (c == '\'') {
      in = In::Literal;
    } else if (c == '[' || c == '{' || (c == '.' && ++dots > kMaxPolicyNesting)) {
      if (c == '.' || ++depth > kMaxPolicyNesting) {
        return at("nested more than " + std::to_string(kMaxPolicyNesting) +
                  " levels deep (arrays, inline tables or dotted keys); policies never need that");
      }
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
  }
  return std::nullopt;
}

// toml11 3.7 reports a syntax error as a multi-line text with the source lines and carets. The
// one-line diagnostic takes the message from the first line, and the line and column of the
// last marked source line (the place the parser gave up), with that caret's hint.
Diagnostic syntaxDiagnostic(const std::string& what, const std::string& file) {
  Diagnostic d;
  d.where.file = file;
  auto lines = core::split(what, '\n');
  std::string_view head = lines.empty() ? std::string_view(what) : lines[0];
  if (head.starts_with("[error] ")) head.remove_prefix(8);
  // "toml::parse_array: ..." or "parse_ml_basic_string: ...": the parser's function is noise.
  if (auto colon = head.find(": "); colon != std::string_view::npos &&
                                    std::all_of(head.begin(), head.begin() + static_cast<ptrdiff_t>(colon), [](char c) {
                                      return (c >= 'a' && c <= 'z') || c == '_' || c == ':';
                                    })) {
    head.remove_prefix(colon + 2);
  }
  std::string hint;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    auto bar = lines[i].find(" | ");
    auto num = core::trim(lines[i].substr(0, bar == std::string_view::npos ? 0 : bar));
    if (bar == std::string_view::npos || num.empty() ||
        !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    auto caretLine = lines[i + 1];
    auto caret = caretLine.find_first_of("^~");  // a point or an underlined range
    auto caretBar = caretLine.find('|');
    if (caret == std::string_view::npos || caretBar == std::string_view::npos || caret < caretBar + 2) continue;
    d.where.line = std::stoi(std::string(num));
    d.where.column = static_cast<int>(caret - caretBar - 1);
    hint = std::string(core::trim(caretLine.substr(caret + 1)));
    while (!hint.empty() && (hint.front() == '-' || hint.front() == ' ' || hint.front() == '~')) hint.erase(0, 1);
  }
  // Some of toml11's messages are empty and say it all in the hint ("the next token is not a boolean").
  if (head.empty()) {
    d.message = hint.empty() || hint == "here" ? "not valid TOML here" : hint;
  } else {
    d.message = std::string(head);
    if (!hint.empty() && hint != "here") d.message += " (" + hint + ")";
  }
  if (d.where.line == 0) d.where.line = 1, d.where.column = 1;
  return d;
}

std::string typeName(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean: return "a boolean";
    case toml::value_t::integer: return "an integer";
    case toml::value_t::floating: return "a float";
    case toml::value_t::string: return "a string";
    case toml::value_t::array: return "an array";
    case toml::value_t::table: return "a table";
    case toml::value_t::empty: return "nothing";
    default: break;
  }
  return "a date or time";
}

std::string joinNames(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// Validates one file. Every check reports and goes on, so one run lists every mistake.
class FileParser {
 public:
  FileParser(const std::string& file, std::vector<Diagnostic>& out) : file_(file), out_(out) {}

  void parseTop(const toml::value& top, ParsedFile& parsed) {
    forEachKey(top, "the top level", {"rule", "override"}, [&](const std::string& key, const toml::value& v) {
      if (!v.is_array() ||
          std::any_of(v.as_array().begin(), v.as_array().end(), [](const toml::value& e) { return !e.is_table(); })) {
        error(v, "'" + key + "' must be an array of tables, written [[" + key + "]]");
        return;
      }
      if (v.as_array().size() > kMaxEntriesPerFile) {
        error(v, std::to_string(v.as_array().size()) + " [[" + key + "]] entries in one file; at most " +
                     std::to_string(kMaxEntriesPerFile));
        return;
      }
      for (const auto& t : v.as_array()) {
        if (key == "rule") {
          if (auto r = parseRule(t)) parsed.rules.push_back(std::move(*r));
        } else {
          if (auto o = parseOverride(t)) parsed.overrides.push_back(std::move(*o));
        }
      }
    });
  }

 private:
  using Handler = std::function<void(const std::string&, const toml::value&)>;

  // Locating a value costs toml11 a count of the lines before it; once the report is full,
  // nothing more is located.
  [[nodiscard]] bool full() const { return out_.size() >= kMaxDiagnostics; }

  SourceLoc loc(const toml::value& v) const {
    if (full()) return SourceLoc{file_, 0, 0};
    auto l = v.location();
    return SourceLoc{file_, static_cast<int>(l.line()), static_cast<int>(l.column())};
  }

  // toml11 keeps no location for keys; find the key on the value's line, left of the value.
  SourceLoc keyLoc(const toml::value& v, const std::string& key) const {
    if (full()) return SourceLoc{file_, 0, 0};
    auto l = v.location();
    SourceLoc at = loc(v);
    const auto& text = l.line_str();
    auto pos = l.column() > 1 ? text.rfind(key, l.column() - 1) : std::string::npos;
    if (pos == std::string::npos) pos = text.find(key);
    if (pos != std::string::npos) at.column = static_cast<int>(pos) + 1;
    return at;
  }

  void report(SourceLoc where, Severity sev, std::string message) {
    if (sev == Severity::Error) ++errors_;
    if (full()) {
      ++dropped_;
      return;
    }
    out_.push_back(Diagnostic{std::move(where), sev, std::move(message)});
  }
  void error(const toml::value& v, std::string message) { report(loc(v), Severity::Error, std::move(message)); }
  void errorAt(SourceLoc where, std::string message) { report(std::move(where), Severity::Error, std::move(message)); }
  void warning(const toml::value& v, std::string message) { report(loc(v), Severity::Warning, std::move(message)); }

  // Calls `handle` for each key of a table in file order; unknown keys are errors that list
  // what is allowed there.
  // Calls `handle` for each key of a table; unknown keys are errors that list what is allowed
  // there. Not in file order: toml11 computes a location by counting lines from the start of
  // the file, which is too slow to sort by; the diagnostics are sorted at the end instead.
  void forEachKey(const toml::value& table, const std::string& where, const std::vector<std::string_view>& allowed,
                  const Handler& handle) {
    for (const auto& [k, v] : table.as_table()) {
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        errorAt(keyLoc(v, k), "unknown key '" + k + "' in " + where + "; expected one of: " + joinNames(allowed));
        continue;
      }
      handle(k, v);
    }
  }

  std::optional<std::string> string(const toml::value& v, const std::string& key) {
    if (v.is_string()) return v.as_string().str;
    error(v, "'" + key + "' must be a string, not " + typeName(v));
    return std::nullopt;
  }

  std::optional<bool> boolean(const toml::value& v, const std::string& key) {
    if (v.is_boolean()) return v.as_boolean();
    error(v, "'" + key + "' must be true or false, not " + typeName(v));
    return std::nullopt;
  }

  std::optional<int64_t> integer(const toml::value& v, const std::string& key, int64_t min, int64_t max) {
    if (!v.is_integer()) {
      error(v, "'" + key + "' must be an integer, not " + typeName(v));
      return std::nullopt;
    }
    auto i = v.as_integer();
    if (i < min || i > max) {
      error(v, "'" + key + "' is " + std::to_string(i) + ", out of range " + std::to_string(min) + ".." +
                   std::to_string(max));
      return std::nullopt;
    }
    return i;
  }

  // A single value or an array of them; `one` validates and converts each element.
  template <class T>
  std::vector<T> list(const toml::value& v, const std::string& key,
                      const std::function<std::optional<T>(const toml::value&)>& one) {
    std::vector<T> out;
    if (v.is_array()) {
      if (v.as_array().empty()) error(v, "'" + key + "' is an empty array: it would match nothing");
      for (const auto& e : v.as_array()) {
        if (auto x = one(e)) out.push_back(std::move(*x));
      }
    } else if (auto x = one(v)) {
      out.push_back(std::move(*x));
    }
    return out;
  }

  template <class E>
  std::optional<E> enumValue(const toml::value& v, const std::string& key, const std::vector<std::string_view>& names,
                             const std::function<std::optional<E>(std::string_view)>& parse) {
    auto s = string(v, key);
    if (!s) return std::nullopt;
    if (auto e = parse(*s)) return e;
    error(v, "'" + key + "' is \"" + *s + "\"; expected one of: " + joinNames(names));
    return std::nullopt;
  }

  std::vector<std::string> strings(
      const toml::value& v, const std::string& key,
      const std::function<std::optional<std::string>(const toml::value&, const std::string&)>& check) {
    return list<std::string>(v, key, [&](const toml::value& e) -> std::optional<std::string> {
      auto s = string(e, key);
      if (!s) return std::nullopt;
      if (s->empty()) {
        error(e, "'" + key + "' must not be empty");
        return std::nullopt;
      }
      return check ? check(e, *s) : s;
    });
  }

  std::vector<core::Glob> globs(const toml::value& v, const std::string& key) {
    auto texts = strings(v, key, nullptr);
    return {std::make_move_iterator(texts.begin()), std::make_move_iterator(texts.end())};
  }

  std::vector<uint16_t> ids(const toml::value& v, const std::string& key) {
    return list<uint16_t>(v, key, [&](const toml::value& e) -> std::optional<uint16_t> {
      if (e.is_string()) {
        error(e, "'" + key + "' must be an integer such as 0x8086, not a string");
        return std::nullopt;
      }
      auto i = integer(e, key, 0, 0xffff);
      if (!i) return std::nullopt;
      return static_cast<uint16_t>(*i);
    });
  }

  std::vector<core::DeviceKind> kinds(const toml::value& v, const std::string& key) {
    return list<core::DeviceKind>(v, key, [&](const toml::value& e) {
      return enumValue<core::DeviceKind>(
          e, key, {"nic", "nvme", "bridge", "other"}, [](std::string_view s) -> std::optional<core::DeviceKind> {
            for (auto k :
                 {core::DeviceKind::Nic, core::DeviceKind::Nvme, core::DeviceKind::Bridge, core::DeviceKind::Other}) {
              if (s == core::toString(k)) return k;
            }
            return std::nullopt;
          });
    });
  }

  std::optional<core::DeviceMatch> parseDeviceMatch(const toml::value& t, const std::string& where) {
    if (!t.is_table()) {
      error(t, where + " must be a table");
      return std::nullopt;
    }
    core::DeviceMatch m;
    forEachKey(
        t, where,
        {"vendor", "device", "subsystem-vendor", "subsystem-device", "class", "kind", "driver", "name", "address",
         "removable", "thunderbolt", "untrusted", "in-use", "group-size", "shares-group", "shares-group-with"},
        [&](const std::string& k, const toml::value& v) {
          if (k == "vendor") m.vendor = ids(v, k);
          if (k == "device") m.device = ids(v, k);
          if (k == "subsystem-vendor") m.subsystemVendor = ids(v, k);
          if (k == "subsystem-device") m.subsystemDevice = ids(v, k);
          if (k == "class") {
            m.classes = list<core::ClassPattern>(v, k, [&](const toml::value& e) -> std::optional<core::ClassPattern> {
              auto s = string(e, k);
              if (!s) return std::nullopt;
              if (auto c = core::parseClassPattern(*s)) return c;
              error(e, "'class' is \"" + *s + R"("; expected 2, 4 or 6 hex digits such as "02", "0108", "010802")");
              return std::nullopt;
            });
          }
          if (k == "kind") m.kinds = kinds(v, k);
          if (k == "driver") m.drivers = globs(v, k);
          if (k == "name") m.names = globs(v, k);
          if (k == "address") m.addresses = globs(v, k);
          if (k == "removable") m.removable = boolean(v, k);
          if (k == "thunderbolt") m.thunderbolt = boolean(v, k);
          if (k == "untrusted") m.untrusted = boolean(v, k);
          if (k == "in-use") m.inUse = boolean(v, k);
          if (k == "shares-group") m.sharesGroup = boolean(v, k);
          if (k == "shares-group-with") m.sharesGroupWith = kinds(v, k);
          if (k == "group-size") {
            if (v.is_integer()) {
              if (auto i = integer(v, k, 1, 4096))
                m.groupSize = core::IntRange{static_cast<int>(*i), static_cast<int>(*i)};
            } else if (auto s = string(v, k)) {
              if (auto r = core::parseIntRange(*s)) {
                m.groupSize = r;
              } else {
                error(v, "'group-size' is \"" + *s + R"("; expected a number, ">=2", ">1", "<=4", "<5" or "2..4")");
              }
            }
          }
        });
    return m;
  }

  core::HostMatch parseHostMatch(const toml::value& t) {
    core::HostMatch m;
    if (!t.is_table()) {
      error(t, "[rule.host] must be a table");
      return m;
    }
    forEachKey(
        t, "[rule.host]",
        {"iommu", "mode", "caching-mode", "rwbf", "np-cache", "kernel", "cmdline", "cmdline-absent", "finding"},
        [&](const std::string& k, const toml::value& v) {
          if (k == "iommu") {
            m.iommu = list<core::Vendor>(v, k, [&](const toml::value& e) {
              return enumValue<core::Vendor>(
                  e, k, {"intel", "amd", "arm-smmu", "arm-smmu-v3", "virtio", "none"},
                  [](std::string_view s) -> std::optional<core::Vendor> {
                    for (auto x : {core::Vendor::Intel, core::Vendor::Amd, core::Vendor::ArmSmmu,
                                   core::Vendor::ArmSmmuV3, core::Vendor::Virtio, core::Vendor::None}) {
                      if (s == core::toString(x)) return x;
                    }
                    return std::nullopt;
                  });
            });
          }
          if (k == "mode") {
            m.mode = strings(v, k, [&](const toml::value& e, const std::string& s) -> std::optional<std::string> {
              static const std::vector<std::string_view> modes = {"off", "identity", "DMA", "DMA-FQ"};
              if (std::find(modes.begin(), modes.end(), s) != modes.end()) return s;
              error(e, "'mode' is \"" + s + "\"; expected one of: " + joinNames(modes));
              return std::nullopt;
            });
          }
          if (k == "caching-mode") m.cachingMode = boolean(v, k);
          if (k == "rwbf") m.rwbf = boolean(v, k);
          if (k == "np-cache") m.npCache = boolean(v, k);
          if (k == "kernel") {
            if (auto s = string(v, k)) {
              auto set = core::VersionSet::parse(*s);
              if (set) {
                m.kernel = std::move(set).value();
                m.kernelText = *s;
              } else {
                // The set's message names a column inside the string; point there.
                SourceLoc at = loc(v);
                std::string msg = set.error().message;
                if (msg.starts_with("column ")) {
                  at.column += std::atoi(msg.c_str() + 7);
                  if (auto colon = msg.find(": "); colon != std::string::npos) msg.erase(0, colon + 2);
                }
                errorAt(at, "'kernel' is not a version range: " + msg);
              }
            }
          }
          auto cmdlineEntry = [&](const toml::value& e, const std::string& s) -> std::optional<std::string> {
            if (core::words(s).size() != 1 || s.find('"') != std::string::npos) {
              error(e, "'" + k + R"(' entries are single parameters such as "iommu.strict=1", not ")" + s + "\"");
              return std::nullopt;
            }
            return s;
          };
          if (k == "cmdline") m.cmdline = strings(v, k, cmdlineEntry);
          if (k == "cmdline-absent") m.cmdlineAbsent = strings(v, k, cmdlineEntry);
          if (k == "finding") {
            m.findings = strings(v, k, [&](const toml::value& e, const std::string& s) -> std::optional<std::string> {
              const auto& known = core::knownFindingIds();
              if (std::find(known.begin(), known.end(), s) != known.end()) return s;
              error(e, "'finding' is \"" + s + "\", which iommud does not know; expected one of: " + joinNames(known));
              return std::nullopt;
            });
          }
        });
    return m;
  }

  // [rule.rings] and [rule.channels]: counts or "max", booleans, and tcp-data-split's names.
  void parseEthtool(const toml::value& t, const std::string& where, const std::vector<core::EthtoolKey>& keys,
                    std::map<std::string, core::Amount>& out) {
    if (!t.is_table()) {
      error(t, where + " must be a table");
      return;
    }
    std::vector<std::string_view> names;
    names.reserve(keys.size());
    for (const auto& k : keys) names.push_back(k.name);
    forEachKey(t, where, names, [&](const std::string& k, const toml::value& v) {
      const auto* key = core::findEthtoolKey(keys, k);
      using T = core::EthtoolKey::Type;
      switch (key->type) {
        case T::Bool:
          if (auto b = boolean(v, k)) out[k] = core::Amount{*b ? 1U : 0U};
          return;
        case T::TcpDataSplit:
          if (auto s = string(v, k)) {
            if (*s == "auto")
              out[k] = core::Amount{0U};
            else if (*s == "disabled")
              out[k] = core::Amount{1U};
            else if (*s == "enabled")
              out[k] = core::Amount{2U};
            else
              error(v, "'" + k + "' is \"" + *s + "\"; expected one of: auto, disabled, enabled");
          }
          return;
        case T::CountOrMax:
          if (v.is_string()) {
            if (v.as_string().str == "max") {
              out[k] = core::Amount{};
            } else {
              error(v, "'" + k + "' is \"" + v.as_string().str + R"("; expected a number or "max")");
            }
            return;
          }
          [[fallthrough]];
        case T::Count:
          if (auto i = integer(v, k, 0, UINT32_MAX)) out[k] = core::Amount{static_cast<uint32_t>(*i)};
          return;
      }
    });
  }

  void parseCoalesce(const toml::value& t, std::map<std::string, uint32_t>& out) {
    std::map<std::string, core::Amount> amounts;
    parseEthtool(t, "[rule.coalesce]", core::coalesceKeys(), amounts);
    for (const auto& [k, a] : amounts) out[k] = a.value.value_or(0);
  }

  std::optional<core::ParamSetting> parseParam(const toml::value& t) {
    if (!t.is_table()) {
      error(t, "each [[rule.param]] must be a table");
      return std::nullopt;
    }
    core::ParamSetting p;
    p.where = loc(t);
    bool haveName = false;
    bool haveValue = false;
    std::optional<core::ParamSetting::TakesEffect> takesEffect;
    auto identifier = [](const std::string& s, bool dash) {
      return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [dash](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
               (dash && c == '-');
      });
    };
    forEachKey(t, "[[rule.param]]", {"module", "name", "value", "at", "takes-effect", "optional"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "module") {
                   if (auto s = string(v, k)) {
                     if (identifier(*s, true))
                       p.module = *s;
                     else
                       error(v, "'module' is \"" + *s + "\"; expected a module name (letters, digits, _ and -)");
                   }
                 }
                 if (k == "name") {
                   if (auto s = string(v, k)) {
                     haveName = true;
                     if (identifier(*s, false))
                       p.name = *s;
                     else
                       error(v, "'name' is \"" + *s + "\"; expected a parameter name (letters, digits and _)");
                   }
                 }
                 if (k == "value") {
                   haveValue = true;
                   if (v.is_boolean()) {
                     p.value = v.as_boolean() ? "Y" : "N";
                   } else if (v.is_integer()) {
                     p.value = std::to_string(v.as_integer());
                   } else if (v.is_string()) {
                     // The value ends up on a modprobe.d line: no spaces, comments or line breaks.
                     const auto& s = v.as_string().str;
                     if (s.empty() || std::any_of(s.begin(), s.end(), [](char c) {
                           return c <= ' ' || c == '#' || c == '"' || c == '\'' || c == '\\' || c == 127;
                         })) {
                       error(v, "'value' must be one word of printable characters without quotes, '#' or '\\'");
                     } else {
                       p.value = s;
                     }
                   } else {
                     error(v, "'value' must be a string, an integer or a boolean, not " + typeName(v));
                   }
                 }
                 if (k == "at") {
                   if (auto a = enumValue<core::ParamSetting::At>(
                           v, k, {"runtime", "load"}, [](std::string_view s) -> std::optional<core::ParamSetting::At> {
                             if (s == "runtime") return core::ParamSetting::At::Runtime;
                             if (s == "load") return core::ParamSetting::At::Load;
                             return std::nullopt;
                           })) {
                     p.at = *a;
                   }
                 }
                 if (k == "takes-effect") {
                   takesEffect = enumValue<core::ParamSetting::TakesEffect>(
                       v, k, {"now", "probe"},
                       [](std::string_view s) -> std::optional<core::ParamSetting::TakesEffect> {
                         if (s == "now") return core::ParamSetting::TakesEffect::Now;
                         if (s == "probe") return core::ParamSetting::TakesEffect::Probe;
                         return std::nullopt;
                       });
                 }
                 if (k == "optional") p.optional = boolean(v, k).value_or(false);
               });
    if (!haveName) error(t, "[[rule.param]] needs 'name', the parameter to set");
    if (!haveValue) error(t, "[[rule.param]] needs 'value'");
    if (takesEffect) {
      if (p.at == core::ParamSetting::At::Load) {
        warning(t, "'takes-effect' is meaningless for a load-time parameter: it takes effect when the module loads");
      }
      p.takesEffect = *takesEffect;
    }
    if (!haveName || !haveValue || p.name.empty() || p.value.empty()) return std::nullopt;
    return p;
  }

  std::optional<core::RuleMode> ruleMode(const toml::value& v) {
    return enumValue<core::RuleMode>(v, "mode", {"apply", "advise"},
                                     [](std::string_view s) -> std::optional<core::RuleMode> {
                                       if (s == "apply") return core::RuleMode::Apply;
                                       if (s == "advise") return core::RuleMode::Advise;
                                       return std::nullopt;
                                     });
  }

  std::optional<core::When> when(const toml::value& v) {
    return enumValue<core::When>(v, "when", {"hotplug", "always"}, [](std::string_view s) -> std::optional<core::When> {
      if (s == "hotplug") return core::When::Hotplug;
      if (s == "always") return core::When::Always;
      return std::nullopt;
    });
  }

  std::vector<core::Acceptance> accepts(const toml::value& v) {
    if (!v.is_array()) {
      error(v, "'accept' must be an array such as [\"no-isolation\"], not " + typeName(v));
      return {};
    }
    std::vector<core::Acceptance> out;
    for (const auto& e : v.as_array()) {
      if (auto a = enumValue<core::Acceptance>(e, "accept", {"no-isolation", "lazy-invalidation"},
                                               [](std::string_view s) { return core::parseAcceptance(s); })) {
        out.push_back(*a);
      }
    }
    return out;
  }

  std::optional<core::Rule> parseRule(const toml::value& t) {
    core::Rule r;
    r.where = loc(t);
    size_t errorsBefore = errorCount();
    bool haveName = false;
    bool haveDescription = false;
    forEachKey(t, "[[rule]]",
               {"name", "description", "mode", "when", "accept", "domain", "match", "unless", "host", "rings",
                "channels", "coalesce", "param"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "name") {
                   if (auto s = string(v, k)) {
                     haveName = true;
                     r.name = *s;
                     bool valid =
                         !s->empty() && s->size() <= 64 && std::isalnum(static_cast<unsigned char>((*s)[0])) &&
                         std::all_of(s->begin(), s->end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
                         });
                     if (!valid) {
                       error(v, "'name' is \"" + *s +
                                    "\"; expected lower-case letters, digits, '-', '_' and '.', starting with a letter "
                                    "or digit, at most 64 characters");
                     }
                   }
                 }
                 if (k == "description") {
                   if (auto s = string(v, k)) {
                     haveDescription = true;
                     r.description = *s;
                     if (core::trim(*s).empty()) error(v, "'description' must say what the rule is for");
                   }
                 }
                 if (k == "mode") r.mode = ruleMode(v).value_or(r.mode);
                 if (k == "when") r.when = when(v);
                 if (k == "accept") r.accepts = accepts(v);
                 if (k == "domain") {
                   r.domain =
                       enumValue<core::DomainRequest>(v, k, {"identity", "DMA", "DMA-FQ", "auto"},
                                                      [](std::string_view s) { return core::parseDomainRequest(s); });
                   r.domainWhere = loc(v);
                 }
                 if (k == "match") {
                   if (auto m = parseDeviceMatch(v, "[rule.match]")) r.device = std::move(*m);
                 }
                 if (k == "unless") {
                   // [rule.unless] is one exclusion; [[rule.unless]] several, any of which excludes.
                   if (v.is_array()) {
                     for (const auto& u : v.as_array()) {
                       if (auto m = parseDeviceMatch(u, "[[rule.unless]]")) r.unless.push_back(std::move(*m));
                     }
                   } else if (auto m = parseDeviceMatch(v, "[rule.unless]")) {
                     r.unless.push_back(std::move(*m));
                   }
                 }
                 if (k == "host") r.host = parseHostMatch(v);
                 if (k == "rings") parseEthtool(v, "[rule.rings]", core::ringKeys(), r.rings);
                 if (k == "channels") parseEthtool(v, "[rule.channels]", core::channelKeys(), r.channels);
                 if (k == "coalesce") parseCoalesce(v, r.coalesce);
                 if (k == "param") {
                   if (!v.is_array()) {
                     error(v, "'param' must be an array of tables, written [[rule.param]]");
                   } else {
                     for (const auto& p : v.as_array()) {
                       if (auto ps = parseParam(p)) r.params.push_back(std::move(*ps));
                     }
                   }
                 }
               });
    if (!haveName) error(t, "[[rule]] needs 'name'");
    if (!haveDescription) error(t, "[[rule]] needs 'description': say what the rule is for");
    bool acts = r.domain || !r.rings.empty() || !r.channels.empty() || !r.coalesce.empty() || !r.params.empty();
    if (!acts && errorCount() == errorsBefore) {
      error(t,
            "rule '" + r.name +
                "' does nothing: give it 'domain', [rule.rings], [rule.channels], [rule.coalesce] or [[rule.param]]");
    }
    if (r.domain == core::DomainRequest::Dma) {
      for (auto a : r.accepts) {
        warning(t, "rule '" + r.name + "' accepts " + std::string(core::toString(a)) +
                       " but asks for DMA, which gives up nothing");
      }
    }
    if (errorCount() != errorsBefore) return std::nullopt;
    return r;
  }

  std::optional<Override> parseOverride(const toml::value& t) {
    Override o;
    o.where = loc(t);
    size_t errorsBefore = errorCount();
    forEachKey(t, "[[override]]", {"rule", "mode", "when", "accept", "enabled"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "rule") o.rule = string(v, k).value_or("");
                 if (k == "mode") o.mode = ruleMode(v);
                 if (k == "when") o.when = when(v);
                 if (k == "accept") o.accepts = accepts(v);
                 if (k == "enabled") o.enabled = boolean(v, k);
               });
    if (o.rule.empty()) error(t, "[[override]] needs 'rule', the name of the rule it changes");
    if (!o.mode && !o.when && !o.accepts && !o.enabled) {
      warning(t, "[[override]] changes nothing: give it 'mode', 'when', 'accept' or 'enabled'");
    }
    if (errorCount() != errorsBefore) return std::nullopt;
    return o;
  }

  [[nodiscard]] size_t errorCount() const { return errors_; }

 public:
  [[nodiscard]] size_t dropped() const { return dropped_; }

 private:
  const std::string& file_;
  std::vector<Diagnostic>& out_;
  size_t errors_ = 0;
  size_t dropped_ = 0;
};

}  // namespace

ParsedFile parsePolicyText(std::string_view text, const std::string& fileName) {
  ParsedFile parsed;
  auto fail = [&](int line, int column, std::string message) {
    parsed.diagnostics.push_back(Diagnostic{SourceLoc{fileName, line, column}, Severity::Error, std::move(message)});
    return parsed;
  };
  if (text.size() > kMaxPolicyBytes) {
    return fail(0, 0,
                "file is " + std::to_string(text.size()) + " bytes; policy files are at most " +
                    std::to_string(kMaxPolicyBytes) + " bytes");
  }
  if (auto problem = precheck(text, fileName)) {
    parsed.diagnostics.push_back(std::move(*problem));
    return parsed;
  }
  toml::value top;
  try {
    std::istringstream in{std::string(text)};
    top = toml::parse(in, fileName);
  } catch (const toml::syntax_error& e) {
    parsed.diagnostics.push_back(syntaxDiagnostic(e.what(), fileName));
    return parsed;
  } catch (const std::exception& e) {
    // toml11 throws other exceptions for some malformed input (bad UTF-8, number conversions).
    return fail(1, 1, std::string("not valid TOML: ") + e.what());
  }
  FileParser parser(fileName, parsed.diagnostics);
  parser.parseTop(top, parsed);
  std::stable_sort(parsed.diagnostics.begin(), parsed.diagnostics.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair{a.where.line, a.where.column} < std::pair{b.where.line, b.where.column};
  });
  if (parser.dropped() != 0) {
    Diagnostic more = parsed.diagnostics.back();
    more.message = "and " + std::to_string(parser.dropped()) + " more problems in this file, not shown";
    parsed.diagnostics.push_back(std::move(more));
  }
  return parsed;
}

Loaded combine(std::vector<core::PolicyFile> files, std::vector<ParsedFile> parsed) {
  Loaded out;
  out.policies.files = std::move(files);
  std::map<std::string, size_t> byName;
  for (auto& p : parsed) {
    for (auto& d : p.diagnostics) out.diagnostics.push_back(std::move(d));
    for (auto& r : p.rules) {
      if (auto it = byName.find(r.name); it != byName.end()) {
        out.diagnostics.push_back(Diagnostic{r.where, Severity::Error,
                                             "rule '" + r.name + "' is already defined at " +
                                                 out.policies.rules[it->second].where.str() +
                                                 "; rule names are unique (use [[override]] to change a rule)"});
        continue;
      }
      byName.emplace(r.name, out.policies.rules.size());
      out.policies.rules.push_back(std::move(r));
    }
    // Overrides see the rules of their own and of earlier files only.
    for (const auto& o : p.overrides) {
      auto it = byName.find(o.rule);
      if (it == byName.end()) {
        out.diagnostics.push_back(
            Diagnostic{o.where, Severity::Error,
                       "[[override]] of rule '" + o.rule + "', which no file read before this one defines"});
        continue;
      }
      auto& r = out.policies.rules[it->second];
      if (o.mode) r.mode = *o.mode;
      if (o.when) r.when = *o.when;
      if (o.accepts) r.accepts = *o.accepts;
      if (o.enabled) r.enabled = *o.enabled;
      r.overriddenBy.push_back(o.where.str());
    }
  }
  return out;
}

std::vector<std::string> defaultPolicyDirs() {
  return {"/etc/iommud/policies.d", "/run/iommud/policies.d", IOMMUD_SHIPPED_POLICY_DIR};
}

}  // namespace iommud::config
