#include "app/report/json_writer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
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

// The bytes a JSON string holds as they are: printable ASCII but the quote and the backslash.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (size_t c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

}  // namespace

void JsonWriter::Buffer::makeRoom(size_t n) {
  if (sink_ && size_ > 0) {
    sink_(std::string_view(bytes_.get(), size_));
    size_ = 0;
    if (capacity_ >= n) return;
  }
  reserve(size_ + n);
}

void JsonWriter::Buffer::reserve(size_t least) {
  constexpr size_t kPiece = size_t{64} << 10U;  // what a sink is handed at a time
  const size_t capacity = std::max({least, sink_ ? kPiece : 2 * capacity_, size_t{4096}});
  auto bytes = std::make_unique_for_overwrite<char[]>(capacity);
  if (size_ > 0) std::memcpy(bytes.get(), bytes_.get(), size_);
  bytes_ = std::move(bytes);
  capacity_ = capacity;
}

std::string JsonWriter::Buffer::take() {
  if (sink_ && size_ > 0) sink_(std::string_view(bytes_.get(), size_));
  std::string text = size_ > 0 && !sink_ ? std::string(bytes_.get(), size_) : std::string();
  bytes_.reset();
  size_ = 0;
  capacity_ = 0;
  return text;
}

void JsonWriter::newline() {
  const size_t indent = 2 * levels_.size();
  char* p = out_.grow(1 + indent);
  *p = '\n';
  std::memset(p + 1, ' ', indent);
}

void JsonWriter::beforeValue() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (levels_.empty()) return;
  if (!levels_.back().empty) out_.put(',');
  levels_.back().empty = false;
  newline();
}

JsonWriter& JsonWriter::key(std::string_view name) {
  beforeValue();
  writeString(name);
  char* p = out_.grow(2);
  p[0] = ':';
  p[1] = ' ';
  afterKey_ = true;
  return *this;
}

JsonWriter& JsonWriter::beginObject() {
  beforeValue();
  out_.put('{');
  levels_.push_back({});
  return *this;
}

JsonWriter& JsonWriter::close(char bracket) {
  bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) newline();
  out_.put(bracket);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  return close('}');
}

JsonWriter& JsonWriter::beginArray() {
  beforeValue();
  out_.put('[');
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
  // Most strings of a status document are plain ASCII: written in one piece.
  size_t plain = 0;
  while (plain < s.size() && kPlain[static_cast<unsigned char>(s[plain])]) ++plain;
  if (plain == s.size()) {
    char* p = out_.grow(s.size() + 2);
    p[0] = '"';
    std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    return;
  }
  out_.put('"');
  for (size_t i = 0; i < s.size();) {
    // Plain ASCII needs no escaping: copy runs of it at once.
    size_t run = i;
    while (run < s.size() && kPlain[static_cast<unsigned char>(s[run])]) ++run;
    if (run > i) {
      out_.put(s.substr(i, run - i));
      i = run;
      continue;
    }
    char c = s[i];
    switch (c) {
      case '"': out_.put("\\\""); break;
      case '\\': out_.put("\\\\"); break;
      case '\b': out_.put("\\b"); break;
      case '\f': out_.put("\\f"); break;
      case '\n': out_.put("\\n"); break;
      case '\r': out_.put("\\r"); break;
      case '\t': out_.put("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out_.put(fmt::format("\\u{:04x}", static_cast<unsigned>(c)));
        } else if (size_t n = utf8Length(s, i); n > 0) {
          out_.put(s.substr(i, n));
          i += n;
          continue;
        } else {
          out_.put("\xef\xbf\xbd");  // U+FFFD for a byte that is not UTF-8
        }
    }
    ++i;
  }
  out_.put('"');
}

JsonWriter& JsonWriter::value(bool b) {
  beforeValue();
  out_.put(b ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::value(int64_t n) {
  beforeValue();
  out_.put(std::to_string(n));
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t n) {
  beforeValue();
  out_.put(std::to_string(n));
  return *this;
}

JsonWriter& JsonWriter::value(double d) {
  if (!std::isfinite(d)) return null();
  beforeValue();
  std::string text = fmt::format("{:.3f}", d);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  if (text == "-0") text = "0";
  out_.put(text);
  return *this;
}

JsonWriter& JsonWriter::null() {
  beforeValue();
  out_.put("null");
  return *this;
}

std::string JsonWriter::take(std::string_view end) {
  out_.put(end);
  levels_.clear();
  afterKey_ = false;
  return out_.take();
}

}  // namespace iommud::app
