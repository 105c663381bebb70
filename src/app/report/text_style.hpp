#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace iommud::app {

/// ANSI styling for terminal output; plain text when off.
struct Style {
  bool on;
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
inline std::string wrapText(std::string_view text, size_t indent, size_t width = 100) {
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

}  // namespace iommud::app
