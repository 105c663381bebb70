#include "config/toml_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <type_traits>

#include "core/spelling.hpp"
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
// than rules.maxKeysPerLine keys ('=') or kMaxBasicStringsPerLine basic strings on one line (it
// copies the line for each). One pass;
// the first problem is returned with its 1-based line and column.
class Prechecker {
 public:
  Prechecker(std::string_view text, const std::string& file, const TextRules& rules)
      : text_(text), file_(file), rules_(rules) {}

  std::optional<Diagnostic> run() {
    for (i_ = 0; i_ < text_.size(); ++i_) {
      char c = text_[i_];
      ++col_;
      auto u = static_cast<unsigned char>(c);
      if (u >= 0x80U) {
        size_t n = utf8Length(text_, i_);
        if (n == 0) return at(fmt::format("not valid UTF-8 (byte 0x{:02x}); {} are UTF-8 text", u, rules_.files));
        i_ += n - 1;
        if (in_ == In::Code) return at("a character outside ASCII outside a string or comment");
      } else if (c == '\n') {
        newLine();
      } else if ((u < 0x20U && c != '\t' && c != '\r') || u == 0x7FU) {
        return at(fmt::format("control character 0x{:02x}; {} are text", u, rules_.files));
      } else if (in_ != In::Code) {
        inText(c);
      } else if (auto problem = inCode(c)) {
        return problem;
      }
    }
    return std::nullopt;
  }

 private:
  enum class In { Code, Comment, Basic, Literal, MlBasic, MlLiteral };

  Diagnostic at(std::string message) const {
    return Diagnostic{SourceLoc{file_, line_, col_}, Severity::Error, std::move(message)};
  }

  void newLine() {
    ++line_;
    col_ = 0;
    dots_ = 0;
    keys_ = 0;
    strings_ = 0;
    if (in_ == In::Comment || in_ == In::Basic || in_ == In::Literal) in_ = In::Code;
  }

  void skip(size_t n) {
    i_ += n;
    col_ += static_cast<int>(n);
  }

  // A backslash escapes the next character, but a line-ending backslash is no escape.
  bool escapes(char c) const { return c == '\\' && i_ + 1 < text_.size() && text_[i_ + 1] != '\n'; }

  // A multi-line string closes at the last three quotes of a run of three to five.
  bool closes(char q) {
    size_t run = 0;
    while (i_ + run < text_.size() && text_[i_ + run] == q && run < 5) ++run;
    if (run < 3) return false;
    skip(run - 1);
    return true;
  }

  // Inside a comment or a string: only where it ends matters.
  void inText(char c) {
    switch (in_) {
      case In::Basic:
      case In::MlBasic:
        if (escapes(c))
          skip(1);
        else if (c == '"' && (in_ == In::Basic || closes('"')))
          in_ = In::Code;
        return;
      case In::Literal:
        if (c == '\'') in_ = In::Code;
        return;
      case In::MlLiteral:
        if (c == '\'' && closes('\'')) in_ = In::Code;
        return;
      case In::Comment:
      case In::Code: return;
    }
  }

  std::optional<Diagnostic> inCode(char c) {
    if (c == '#') {
      in_ = In::Comment;
    } else if (text_.substr(i_, 3) == R"(""")") {
      in_ = In::MlBasic;
      skip(2);
    } else if (text_.substr(i_, 3) == "'''") {
      in_ = In::MlLiteral;
      skip(2);
    } else if (c == '"') {
      in_ = In::Basic;
      if (++strings_ > kMaxBasicStringsPerLine) {
        return at("more than " + std::to_string(kMaxBasicStringsPerLine) +
                  " basic strings (\"...\") on one line: put an array's items on lines of their own, or write "
                  "them as literal strings ('...'); " +
                  std::string(rules_.neverNeeds));
      }
    } else if (c == '\'') {
      in_ = In::Literal;
    } else if (c == '[' || c == '{' || (c == '.' && ++dots_ > rules_.maxNesting)) {
      if (c == '.' || ++depth_ > rules_.maxNesting) {
        return at("nested more than " + std::to_string(rules_.maxNesting) +
                  " levels deep (arrays, inline tables or dotted keys); " + std::string(rules_.neverNeeds));
      }
    } else if (c == ']' || c == '}') {
      depth_ = std::max(0, depth_ - 1);
    } else if (c == '=' && ++keys_ > rules_.maxKeysPerLine) {
      return at("more than " + std::to_string(rules_.maxKeysPerLine) + " keys on one line (inline tables); " +
                std::string(rules_.neverNeeds));
    }
    return std::nullopt;
  }

  std::string_view text_;
  const std::string& file_;
  const TextRules& rules_;
  size_t i_ = 0;
  int depth_ = 0;
  int dots_ = 0;
  int keys_ = 0;
  int strings_ = 0;
  int line_ = 1;
  int col_ = 0;
  In in_ = In::Code;
};

std::optional<Diagnostic> precheck(std::string_view text, const std::string& file, const TextRules& rules) {
  return Prechecker(text, file, rules).run();
}

// A place toml11 marked in a syntax error: line, column and the caret's hint.
struct Mark {
  int line = 0;
  int column = 0;
  std::string hint;
};

// toml11 3.7 reports a syntax error as a multi-line text with the source lines and carets: the
// message of its first line (without "[error]" and the parser's function, which are noise) and
// the marked places, the last one where the parser gave up.
std::pair<std::string, std::vector<Mark>> readSyntaxError(const std::string& what) {
  auto lines = core::split(what, '\n');
  std::string_view head = lines.empty() ? std::string_view(what) : lines[0];
  if (head.starts_with("[error] ")) head.remove_prefix(8);
  if (auto colon = head.find(": "); colon != std::string_view::npos &&
                                    std::all_of(head.begin(), head.begin() + static_cast<ptrdiff_t>(colon), [](char c) {
                                      return (c >= 'a' && c <= 'z') || c == '_' || c == ':';
                                    })) {
    head.remove_prefix(colon + 2);
  }
  std::vector<Mark> marks;
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
    Mark m{std::stoi(std::string(num)), static_cast<int>(caret - caretBar - 1), ""};
    m.hint = std::string(core::trim(caretLine.substr(caret + 1)));
    while (!m.hint.empty() && (m.hint.front() == '-' || m.hint.front() == ' ' || m.hint.front() == '~')) {
      m.hint.erase(0, 1);
    }
    marks.push_back(std::move(m));
  }
  return {std::string(head), std::move(marks)};
}

// The 1-based line of `text`, without its '\n' (empty past the end).
std::string_view lineOfText(std::string_view text, int line) {
  for (int n = 1; n < line; ++n) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) return {};
    text.remove_prefix(nl + 1);
  }
  return text.substr(0, text.find('\n'));
}

// Where code ends on a line: before a comment (a '#' outside quotes) and trailing blanks.
std::string_view withoutComment(std::string_view line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (quote != 0) {
      if (line[i] == '\\' && quote == '"')
        ++i;
      else if (line[i] == quote)
        quote = 0;
    } else if (line[i] == '"' || line[i] == '\'') {
      quote = line[i];
    } else if (line[i] == '#') {
      line = line.substr(0, i);
      break;
    }
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
  return line;
}

// The word at a 1-based column: what a value or key that is not one looks like.
std::string wordAt(std::string_view line, int column) {
  size_t from = column > 0 ? static_cast<size_t>(column - 1) : 0;
  if (from >= line.size()) return "";
  size_t to = line.find_first_of(" \t,]}#", from);
  return std::string(line.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from));
}

// toml11's words for the usual mistakes say what its parser met, not what the writer got wrong
// ("an invalid key appeared" for an unclosed table header): the plain cause, where it is, when
// the message is one of those. `at` is the last mark; it moves where the cause is elsewhere.
std::optional<std::string> plainCause(std::string_view head, const std::vector<Mark>& marks, std::string_view text,
                                      Mark& at) {
  const std::string_view line = lineOfText(text, at.line);
  const std::string_view code = withoutComment(line);
  auto trimmed = core::trim(code);
  auto has = [&](std::string_view words) { return head.find(words) != std::string_view::npos; };
  if (has("an invalid key appeared") && trimmed.starts_with("[")) {
    const bool array = trimmed.starts_with("[[");
    const std::string_view close = array ? "]]" : "]";
    if (!trimmed.ends_with(close) || (array && trimmed.ends_with("]") && !trimmed.ends_with("]]"))) {
      at.column = static_cast<int>(code.size()) + 1;
      return "the table header '" + std::string(trimmed) + "' lacks its closing '" + std::string(close) + "'";
    }
    return "the table header '" + std::string(trimmed) +
           "' is not a valid name: letters, digits, '-' and '_', parts joined by '.'";
  }
  if (has("an invalid key appeared")) {
    return "'" + wordAt(line, at.column) + "' is not a valid key: keys are letters, digits, '-' and '_', or quoted";
  }
  if (has("not a valid string") || has("not a valid literal string")) {
    const char q = has("literal") ? '\'' : '"';
    return fmt::format(
        "the string opened by {} at column {} is not closed on its line (strings end with {} on the "
        "line they start on)",
        q, at.column, q);
  }
  if (has("missing key-value separator")) {
    return "'=' missing between the key and its value";
  }
  if (has("missing value after key-value separator")) return "no value after '='";
  if (has("already exists") && marks.size() >= 2) {
    const bool table = head.starts_with("table");
    auto first = head.find('"');
    auto last = head.rfind('"');
    std::string name = first != last ? std::string(head.substr(first + 1, last - first - 1)) : std::string("this");
    return fmt::format("{} {} is defined twice (first at line {}); a {} may appear once", table ? "table" : "key",
                       table ? "[" + name + "]" : "'" + name + "'", marks.front().line, table ? "table" : "key");
  }
  if (has("unknown value appeared")) {
    return "'" + wordAt(line, at.column) +
           "' is not a value: quote strings (\"...\"), and write booleans true or false, numbers in digits";
  }
  if (has("invalid line format")) {
    return "'" + wordAt(line, at.column) + "' after the value: one key = value per line (a comment starts with #)";
  }
  if (has("missing array separator") && marks.size() >= 2) {
    at = marks.front();
    return "the array opened here is not closed: ',' between values and ']' at its end";
  }
  return std::nullopt;
}

// The one-line diagnostic of a toml11 syntax error: the plain cause where the mistake is a usual
// one, else toml11's message and the caret's hint, at the place the parser gave up.
Diagnostic syntaxDiagnostic(const std::string& what, const std::string& file, std::string_view text) {
  auto [head, marks] = readSyntaxError(what);
  Mark at = marks.empty() ? Mark{1, 1, ""} : marks.back();
  Diagnostic d;
  if (auto plain = plainCause(head, marks, text, at)) {
    d.message = std::move(*plain);
  } else if (head.empty()) {
    // Some of toml11's messages are empty and say it all in the hint ("the next token is not a boolean").
    d.message = at.hint.empty() || at.hint == "here" ? "not valid TOML here" : at.hint;
  } else {
    d.message = head;
    if (!at.hint.empty() && at.hint != "here") d.message += " (" + at.hint + ")";
  }
  d.where = SourceLoc{file, at.line, at.column};
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
    out.push_back(syntaxDiagnostic(e.what(), fileName, text));
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
      const std::vector<std::string> names(allowed.begin(), allowed.end());
      auto near = core::nearestWord(k, names);
      errorAt(keyLoc(v, k),
              "unknown key '" + k + "' in " + where +
                  (near ? "; did you mean '" + *near + "'?" : "; expected one of: " + joinNames(allowed)));
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
