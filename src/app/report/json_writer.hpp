#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iommud::app {

/// Writes JSON straight into a string, laid out as nlohmann::json::dump(2) lays it out, without
/// building a tree first: `status --json` on a large host spends less time than reading it.
/// Strings that are not valid UTF-8 (sysfs holds bytes) get U+FFFD instead of failing.
class JsonWriter {
 public:
  /// Where a writer with a sink hands its document: pieces of about 64 KiB, in order.
  using Sink = std::function<void(std::string_view piece)>;

  JsonWriter() = default;
  /// A writer that hands its document to `sink` as it grows, and the rest at take(): the whole
  /// of it is never in memory (`status --json` of 4096 devices is 7 MB, whose pages, touched
  /// once each as a buffer doubles and is copied, cost more than writing it out).
  explicit JsonWriter(Sink sink) : out_(std::move(sink)) {}

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(int64_t n);
  JsonWriter& value(uint64_t n);
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  /// A finite number with at most three decimals ("1234.5"); null for NaN and infinities.
  JsonWriter& value(double d);
  JsonWriter& null();
  template <class T>
  JsonWriter& value(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }
  template <class T>
  JsonWriter& value(const std::vector<T>& items) {
    beginArray();
    for (const auto& i : items) value(i);
    return endArray();
  }

  /// key(name).value(v) in one call.
  template <class T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  /// The document followed by `end` (say "\n"); the writer is empty afterwards. With a sink,
  /// the rest of it goes there and the string is empty.
  std::string take(std::string_view end = {});

 private:
  void beforeValue();
  void newline();
  void writeString(std::string_view s);
  JsonWriter& close(char bracket);

  // The document as it grows: bytes appended without a zero fill or a call per character.
  class Buffer {
   public:
    Buffer() = default;
    explicit Buffer(Sink sink) : sink_(std::move(sink)) {}
    /// n more bytes at the end, for the caller to write.
    char* grow(size_t n) {
      if (capacity_ - size_ < n) makeRoom(n);
      char* at = bytes_.get() + size_;
      size_ += n;
      return at;
    }
    void put(std::string_view s) {
      if (!s.empty()) std::memcpy(grow(s.size()), s.data(), s.size());  // an empty view's data may be null
    }
    void put(char c) { *grow(1) = c; }
    std::string take();

   private:
    void makeRoom(size_t n);  // with a sink, by handing it what is written; else by growing
    void reserve(size_t least);
    Sink sink_;
    std::unique_ptr<char[]> bytes_;
    size_t size_ = 0;
    size_t capacity_ = 0;
  };

  struct Level {
    bool empty = true;
  };
  std::vector<Level> levels_;
  Buffer out_;
  bool afterKey_ = false;
};

}  // namespace iommud::app
