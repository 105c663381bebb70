#include "app/report/json_writer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace json_writer_test {

using iommud::app::JsonWriter;

TEST(JsonWriter, LaysOutLikeNlohmannDumpWithIndentTwo) {
  JsonWriter w;
  w.beginObject()
      .field("a", 1)
      .field("b", std::vector<std::string>{})
      .field("c", std::vector<int>{1, 2})
      .field("d", std::optional<bool>{})
      .key("e")
      .beginObject()
      .endObject()
      .key("f")
      .beginArray()
      .beginObject()
      .field("g", "h\"\\\n\t\x01")
      .endObject()
      .endArray()
      .field("big", uint64_t{18446744073709551615ULL})
      .field("neg", int64_t{-5})
      .endObject();
  std::string text = w.take();
  auto expected = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(text, expected.dump(2));
  EXPECT_EQ(expected["f"][0]["g"], "h\"\\\n\t\x01");
}

TEST(JsonWriter, ReplacesBytesThatAreNotUtf8) {
  JsonWriter w;
  w.value(std::string("caf\xc3\xa9 \xff\xfe ok \xe2\x82"));
  std::string text = w.take();
  EXPECT_EQ(text, "\"caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd ok \xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_TRUE(nlohmann::json::accept(text));
}

// With a sink, the document goes there in pieces of about 64 KiB (one string longer than that in
// one piece of its own), byte for byte the document the writer without one returns.
TEST(JsonWriter, HandsASinkTheSameDocumentInPieces) {
  auto write = [](JsonWriter& w) {
    w.beginObject().key("items").beginArray();
    for (int i = 0; i < 20000; ++i)
      w.beginObject().field("i", i).field("name", "item \"" + std::to_string(i)).endObject();
    w.endArray().field("long", std::string(200000, 'x')).endObject();
  };
  JsonWriter whole;
  write(whole);
  const std::string expected = whole.take("\n");
  ASSERT_GT(expected.size(), size_t{1} << 20U);

  std::vector<size_t> pieces;
  std::string got;
  JsonWriter w([&](std::string_view piece) {
    pieces.push_back(piece.size());
    got.append(piece);
  });
  write(w);
  ASSERT_GT(pieces.size(), 1U) << "handed nothing before the end";
  EXPECT_EQ(w.take("\n"), "");
  EXPECT_EQ(got, expected);
  EXPECT_EQ(std::count(pieces.begin(), pieces.end(), 0U), 0);
  // The long string's piece is the one over 64 KiB.
  EXPECT_EQ(std::count_if(pieces.begin(), pieces.end(), [](size_t n) { return n > (size_t{64} << 10U); }), 1);
}

}  // namespace json_writer_test
