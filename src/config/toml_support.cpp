#include "config/toml_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <type_traits>

#include "core/text.hpp"

namespace iommud::config::detail {

using core::SourceLoc;
using Severity = Diagnostic::Severity;

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
// UTF-8 paths assert and throw from deep inside), nesting deeper than rules.maxNesting of
// '[', '{' or dotted keys outside strings and comments (it recurses without limit), and more
// than rules.maxKeysPerLine keys ('=') on one line (it copies the line for each key). One pass;
// the first problem is returned with its 1-based line and column.
std::optional<Diagnostic> precheck(std::string_view text, const std::string& file, const TextRules& rules) {
  int depth = 0;
  int dots = 0;
  int keys = 0;
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
      if (n == 0) return at(fmt::format("not valid UTF-8 (byte 0x{:02x}); {} are UTF-8 text", u, rules.files));
      i += n - 1;
      if (in == In::Code) return at("a character outside ASCII outside a string or comment");
      continue;
    }
    if (c == '\n') {
      ++line;
      col = 0;
      dots = 0;
      keys = 0;
      if (in == In::Comment || in == In::Basic || in == In::Literal) in = In::Code;
      continue;
    }
    if ((u < 0x20U && c != '\t' && c != '\r') || u == 0x7FU) {
      return at(fmt::format("control character 0x{:02x}; {} are text", u, rules.files));
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
    } else if (c == '[' || c == '{' || (c == '.' && ++dots > rules.maxNesting)) {
      if (c == '.' || ++depth > rules.maxNesting) {
        return at("nested more than " + std::to_string(rules.maxNesting) +
                  " levels deep (arrays, inline tables or dotted keys); " + std::string(rules.neverNeeds));
      }
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    } else if (c == '=' && ++keys > rules.maxKeysPerLine) {
      return at("more than " + std::to_string(rules.maxKeysPerLine) + " keys on one line (inline tables); " +
                std::string(rules.neverNeeds));
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

// Where toml11 read a value, as an offset into its text (toml::value::location() would count
// the lines before it); nothing for a value it did not read.
std::optional<size_t> offsetOf(const toml::value& v) {
  const auto* region = dynamic_cast<const toml::detail::region*>(toml::detail::get_region(v));
  if (region == nullptr) return std::nullopt;
  return static_cast<size_t>(region->first() - region->begin());
}

}  // namespace

}  // namespace iommud::config::detail

// toml11 3.7 gives each value it parses the comments around it (parse_value_helper calls
// region::comments()), which reads the value's whole line: on one long line of values (an array,
// an inline table) that is quadratic, 30 s for 240 KB. toml::value discards comments anyway, so
// these specializations build the same values without looking. They must be seen before
// toml::parse is instantiated, which is done only below in this file.
namespace toml::detail {

static_assert(std::is_same_v<toml::value::comment_type, toml::discard_comments>,
              "the specializations below drop comments, which toml::value must not keep");

template <class T>
using Parsed = result<std::pair<T, region>, std::string>;
using Built = result<toml::value, std::string>;

template <class T>
Built withoutComments(Parsed<T>&& parsed) {
  if (parsed.is_err()) return err(std::move(parsed.as_err()));
  return ok(toml::value(std::move(parsed.as_ok()), std::vector<std::string>{}));
}

// clang-format off
template <> Built parse_value_helper<toml::value, boolean>(Parsed<boolean> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, integer>(Parsed<integer> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, floating>(Parsed<floating> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, string>(Parsed<string> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, local_time>(Parsed<local_time> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, local_date>(Parsed<local_date> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, local_datetime>(Parsed<local_datetime> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, offset_datetime>(Parsed<offset_datetime> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, toml::array>(Parsed<toml::array> rslt) { return withoutComments(std::move(rslt)); }
template <> Built parse_value_helper<toml::value, toml::table>(Parsed<toml::table> rslt) { return withoutComments(std::move(rslt)); }
// clang-format on

}  // namespace toml::detail

namespace iommud::config::detail {

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

std::optional<toml::value> parseToml(std::string_view text, const std::string& fileName, const TextRules& rules,
                                     std::vector<Diagnostic>& out) {
  if (text.size() > rules.maxBytes) {
    out.push_back(Diagnostic{SourceLoc{fileName, 0, 0}, Severity::Error,
                             "file is " + std::to_string(text.size()) + " bytes; " + std::string(rules.files) +
                                 " are at most " + std::to_string(rules.maxBytes) + " bytes"});
    return std::nullopt;
  }
  if (auto problem = precheck(text, fileName, rules)) {
    out.push_back(std::move(*problem));
    return std::nullopt;
  }
  try {
    std::istringstream in{std::string(text)};
    return toml::parse(in, fileName);
  } catch (const toml::syntax_error& e) {
    out.push_back(syntaxDiagnostic(e.what(), fileName));
  } catch (const std::exception& e) {
    // toml11 throws other exceptions for some malformed input (bad UTF-8, number conversions).
    out.push_back(Diagnostic{SourceLoc{fileName, 1, 1}, Severity::Error, std::string("not valid TOML: ") + e.what()});
  }
  return std::nullopt;
}

void Checker::finish() {
  std::stable_sort(out_.begin(), out_.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair{a.where.line, a.where.column} < std::pair{b.where.line, b.where.column};
  });
  if (dropped_ != 0) {
    Diagnostic more = out_.back();
    more.message = "and " + std::to_string(dropped_) + " more problems in this file, not shown";
    out_.push_back(std::move(more));
  }
}

SourceLoc Checker::loc(const toml::value& v) const {
  if (full()) return SourceLoc{file_, 0, 0};
  auto offset = offsetOf(v);
  if (!offset) return SourceLoc{file_, 1, 1};
  auto at = lines_.at(*offset);
  return SourceLoc{file_, at.line, at.column};
}

SourceLoc Checker::keyLoc(const toml::value& v, const std::string& key) const {
  SourceLoc at = loc(v);
  auto offset = offsetOf(v);
  if (at.line == 0 || !offset) return at;
  auto text = lines_.lineOf(*offset);
  auto pos = at.column > 1 ? text.rfind(key, static_cast<size_t>(at.column) - 1) : std::string_view::npos;
  if (pos == std::string_view::npos) pos = text.find(key);
  if (pos != std::string_view::npos) at.column = static_cast<int>(pos) + 1;
  return at;
}

void Checker::report(SourceLoc where, Severity sev, std::string message) {
  if (sev == Severity::Error) ++errors_;
  if (full()) {
    ++dropped_;
    return;
  }
  out_.push_back(Diagnostic{std::move(where), sev, std::move(message)});
}

void Checker::forEachKey(const toml::value& table, const std::string& where,
                         const std::vector<std::string_view>& allowed, const Handler& handle) {
  for (const auto& [k, v] : table.as_table()) {
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      errorAt(keyLoc(v, k), "unknown key '" + k + "' in " + where + "; expected one of: " + joinNames(allowed));
      continue;
    }
    handle(k, v);
  }
}

std::optional<std::string> Checker::string(const toml::value& v, const std::string& key) {
  if (v.is_string()) return v.as_string().str;
  error(v, "'" + key + "' must be a string, not " + typeName(v));
  return std::nullopt;
}

std::optional<bool> Checker::boolean(const toml::value& v, const std::string& key) {
  if (v.is_boolean()) return v.as_boolean();
  error(v, "'" + key + "' must be true or false, not " + typeName(v));
  return std::nullopt;
}

std::optional<int64_t> Checker::integer(const toml::value& v, const std::string& key, int64_t min, int64_t max) {
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

}  // namespace iommud::config::detail
