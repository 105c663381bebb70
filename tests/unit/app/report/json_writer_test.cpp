#include "app/report/json_writer.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

}  // namespace json_writer_test
