#include "app/report/json_writer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace iommud::app {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t utf8Length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

void JsonWriter::newline() {
  out_ += '\n';
  out_.append(2 * levels_.size(), ' ');
}

void JsonWriter::beforeValue() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (levels_.empty()) return;
  if (!levels_.back().empty) out_ += ',';
  levels_.back().empty = false;
  newline();
}

JsonWriter& JsonWriter::key(std::string_view name) {
  beforeValue();
  writeString(name);
  out_ += ": ";
  afterKey_ = true;
  return *this;
}

JsonWriter& JsonWriter::beginObject() {
  beforeValue();
  out_ += '{';
  levels_.push_back({});
  return *this;
}

JsonWriter& JsonWriter::close(char bracket) {
  bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) newline();
  out_ += bracket;
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  return close('}');
}

JsonWriter& JsonWriter::beginArray() {
  beforeValue();
  out_ += '[';
  levels_.push_back({});
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  return close(']');
}

JsonWriter& JsonWriter::value(std::string_view s) {
  beforeValue();
  writeString(s);
  return *this;
}

void JsonWriter::writeString(std::string_view s) {
  out_ += '"';
  for (size_t i = 0; i < s.size();) {
    // Plain ASCII needs no escaping: copy runs of it at once (most of a status document).
    size_t run = i;
    while (run < s.size() && static_cast<unsigned char>(s[run]) >= 0x20 && static_cast<unsigned char>(s[run]) < 0x80 &&
           s[run] != '"' && s[run] != '\\') {
      ++run;
    }
    if (run > i) {
      out_.append(s.substr(i, run - i));
      i = run;
      continue;
    }
    char c = s[i];
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\b': out_ += "\\b"; break;
      case '\f': out_ += "\\f"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out_ += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else if (size_t n = utf8Length(s, i); n > 0) {
          out_.append(s.substr(i, n));
          i += n;
          continue;
        } else {
          out_ += "\xef\xbf\xbd";  // U+FFFD for a byte that is not UTF-8
        }
    }
    ++i;
  }
  out_ += '"';
}

JsonWriter& JsonWriter::value(bool b) {
  beforeValue();
  out_ += b ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(int64_t n) {
  beforeValue();
  out_ += std::to_string(n);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t n) {
  beforeValue();
  out_ += std::to_string(n);
  return *this;
}

JsonWriter& JsonWriter::value(double d) {
  if (!std::isfinite(d)) return null();
  beforeValue();
  std::string text = fmt::format("{:.3f}", d);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  if (text == "-0") text = "0";
  out_ += text;
  return *this;
}

JsonWriter& JsonWriter::null() {
  beforeValue();
  out_ += "null";
  return *this;
}

std::string JsonWriter::take() {
  return std::exchange(out_, {});
}

}  // namespace iommud::app
