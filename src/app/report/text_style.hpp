#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>

namespace iommud::app {

/// The columns of text when the terminal's width is not known (a pipe without COLUMNS), and the
/// widest a paragraph is wrapped to on a wider terminal: longer lines are hard to read.
inline constexpr size_t kTextWidth = 100;

/// ANSI styling for terminal output (plain text when off), and the terminal's width: no line is
/// wider (fitLines), and paragraphs are wrapped to the narrower of it and kTextWidth.
struct Style {
  bool on;
  size_t width = kTextWidth;
  [[nodiscard]] size_t proseWidth() const { return std::min(width, kTextWidth); }
  [[nodiscard]] std::string wrap(std::string_view code, std::string_view text) const {
    return on ? fmt::format("\033[{}m{}\033[0m", code, text) : std::string(text);
  }
  [[nodiscard]] std::string bold(std::string_view t) const { return wrap("1", t); }
  [[nodiscard]] std::string dim(std::string_view t) const { return wrap("2", t); }
  [[nodiscard]] std::string red(std::string_view t) const { return wrap("31", t); }
  [[nodiscard]] std::string yellow(std::string_view t) const { return wrap("33", t); }
  [[nodiscard]] std::string green(std::string_view t) const { return wrap("32", t); }
  [[nodiscard]] std::string cyan(std::string_view t) const { return wrap("36", t); }
};

// Wraps text to `width` columns, every line after the first indented by `indent`.
inline std::string wrapText(std::string_view text, size_t indent, size_t width = kTextWidth) {
  std::string out;
  size_t col = indent;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    // A `command` stays on one line, whole, to be copied.
    if (text[i] == '`') {
      if (size_t close = text.find('`', i + 1); close != std::string_view::npos) j = text.find(' ', close);
    }
    if (j == std::string_view::npos) j = text.size();
    auto word = text.substr(i, j - i);
    if (col > indent && col + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
    } else if (col > indent) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    i = j + 1;
  }
  return out;
}

/// A report's text, built a line at a time: `line("...")` appends it and a newline.
struct Lines {
  std::string out;
  void operator()(const std::string& l) { out += l + "\n"; }
};

namespace detail {

// The length of the escape code (ESC [ digits ; m) at text[i], or 0.
inline size_t escapeAt(std::string_view text, size_t i) {
  if (text[i] != '\033' || i + 1 >= text.size() || text[i + 1] != '[') return 0;
  size_t j = i + 2;
  while (j < text.size() && ((text[j] >= '0' && text[j] <= '9') || text[j] == ';')) ++j;
  return j < text.size() && text[j] == 'm' ? j + 1 - i : 0;
}

// Where the pieces of a broken line start: under its value when it is a `Label  value` line or a
// row (the column after its first run of two or more spaces, within the line's first half), else
// two columns in from the line's own indentation.
inline size_t hangOf(std::string_view line, size_t indent, size_t width) {
  size_t col = 0;
  size_t spaces = 0;
  for (size_t i = 0; i < line.size() && col < width / 2; ++i) {
    if (size_t n = escapeAt(line, i); n != 0) {
      i += n - 1;
      continue;
    }
    if (line[i] == ' ') {
      ++spaces;
    } else {
      if (spaces >= 2 && col > indent + spaces) return col;
      spaces = 0;
    }
    ++col;
  }
  return indent + 2;
}

// How far a piece of a line starting at column `lead` reaches before `width`: `stop`, the first
// byte past it (line.size() when all of it fits), and `cut`, its last space that can end it (npos
// for none): not inside a `command` or a [tag], which stay whole, nor in the indentation.
struct Piece {
  size_t stop = 0;
  size_t cut = std::string_view::npos;
};

inline Piece pieceOf(std::string_view line, size_t width, size_t lead, size_t indent) {
  Piece p;
  size_t col = lead;
  bool quoted = false;
  int bracketed = 0;
  for (; p.stop < line.size(); ++p.stop) {
    if (size_t n = escapeAt(line, p.stop); n != 0) {
      p.stop += n - 1;
      continue;
    }
    if (col >= width) break;
    const char c = line[p.stop];
    if (c == '`') quoted = !quoted;
    if (c == '[') ++bracketed;
    if (c == ']' && bracketed > 0) --bracketed;
    if (c == ' ' && !quoted && bracketed == 0 && col > std::max(lead, indent)) p.cut = p.stop;
    ++col;
  }
  return p;
}

// Appends `line` to `out` broken at spaces so that no piece is wider than `width` columns; see
// fitLines.
inline void fitLine(std::string_view line, size_t width, std::string& out) {
  const size_t indent =
      std::min(line.find_first_not_of(' ') == std::string_view::npos ? 0 : line.find_first_not_of(' '), width / 2);
  const size_t hang = hangOf(line, indent, width);
  size_t lead = 0;  // the columns before `line` on the current output line
  for (;;) {
    auto [stop, cut] = pieceOf(line, width, lead, indent);
    // All of it fits, or one token wider than the line: whole, then a break.
    if (stop < line.size() && cut == std::string_view::npos) cut = line.find(' ', stop);
    if (stop >= line.size() || cut == std::string_view::npos) {
      out += line;
      return;
    }
    size_t end = cut;
    while (end > 0 && line[end - 1] == ' ') --end;
    out += line.substr(0, end);
    size_t next = line.find_first_not_of(' ', cut);
    if (next == std::string_view::npos) return;
    out += "\n" + std::string(hang, ' ');
    line = line.substr(next);
    lead = hang;
  }
}

}  // namespace detail

/// A header line's label ("Kernel", "Exposure"), padded to the values' column (the 10th) before it
/// is styled: the escape codes take no room on the terminal.
inline std::string label(const Style& st, std::string_view text) {
  return st.bold(text) + std::string(text.size() < 9 ? 9 - text.size() : 1, ' ');
}

/// Every line of `text` no wider than `width` columns (escape codes take none): a longer line is
/// broken at its last space that fits, the rest indented two columns more than the line; a word
/// wider than that (a path, a `command`) stays whole. For rows and tables, whose columns
/// wrapText does not see.
inline std::string fitLines(std::string_view text, size_t width) {
  std::string out;
  out.reserve(text.size());
  for (;;) {
    size_t end = text.find('\n');
    detail::fitLine(text.substr(0, end), width, out);
    if (end == std::string_view::npos) return out;
    out += '\n';
    text = text.substr(end + 1);
  }
}

}  // namespace iommud::app
