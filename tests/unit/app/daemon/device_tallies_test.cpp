#include "app/daemon/device_tallies.hpp"

#include <gtest/gtest.h>

namespace device_tallies_test {

namespace app = iommud::app;
using News = app::DeviceNews;

TEST(DeviceTallies, CountsEachDeviceOnceAndAFailedOneNotAsTuned) {
  app::DeviceTallies t;
  EXPECT_EQ(t.statusLine(), "0 devices tuned, 0 advised, 0 refused, 0 failed");
  for (const app::DeviceEvent& e : std::vector<app::DeviceEvent>{{News::Tuned, "a", "id-a"},
                                                                 {News::Tuned, "a", "id-a"},
                                                                 {News::Advised, "a", "id-a"},
                                                                 {News::Tuned, "b", "id-b"},
                                                                 {News::Failed, "b", "id-b"},
                                                                 {News::Refused, "c", ""},
                                                                 {News::Rebound, "d", ""}}) {
    t.take(e);
  }
  EXPECT_EQ(t.statusLine(), "1 devices tuned, 1 advised, 1 refused, 1 failed");
  EXPECT_TRUE(t.anyFailed());
  t.take({News::Forget, "b", ""});
  EXPECT_EQ(t.statusLine(), "1 devices tuned, 1 advised, 1 refused, 0 failed");
  EXPECT_TRUE(t.anyFailed());  // since the start
  t.clear();
  EXPECT_EQ(t.statusLine(), "0 devices tuned, 0 advised, 0 refused, 0 failed");
}

TEST(DeviceTallies, ATunedDeviceThatWentIsRememberedByIdentityUntilItIsBack) {
  app::DeviceTallies t;
  t.take({News::Tuned, "0000:02:00.0", "144d:a808 serial S1"});
  t.take({News::Advised, "0000:03:00.0", "144d:a808 serial S2"});  // not tuned: not remembered
  t.take({News::Tuned, "0000:04:00.0", ""});                       // no identity: not remembered
  EXPECT_TRUE(t.removed("0000:02:00.0"));
  EXPECT_TRUE(t.removed("0000:03:00.0"));
  EXPECT_TRUE(t.removed("0000:04:00.0"));
  EXPECT_FALSE(t.removed("0000:05:00.0"));  // never known: the status line is as it was
  EXPECT_EQ(t.departed(), (std::map<std::string, std::string>{{"144d:a808 serial S1", "0000:02:00.0"}}));
  EXPECT_EQ(t.statusLine(), "0 devices tuned, 0 advised, 0 refused, 0 failed");
  t.take({News::Replugged, "0000:06:00.0", "144d:a808 serial S1"});
  EXPECT_TRUE(t.departed().empty());
}

// The news of a piece of work, taken in: what failed or was reverted is left alone until a re-plug
// (or a reload), what a later piece of work decides on again is not; the whole host starts afresh.
TEST(DeviceTallies, NewsTakenInTellsTheHotplugFilterWhatToLeaveAlone) {
  using namespace std::chrono_literals;
  app::DeviceTallies t;
  app::HotplugFilter f{1ms};
  app::absorb({{News::Forget, "a", ""}, {News::Failed, "a", "id-a"}, {News::Reverted, "b", ""}, {News::Tuned, "c", ""}},
              false, t, f);
  EXPECT_TRUE(f.leftAlone("a"));
  EXPECT_TRUE(f.leftAlone("b"));
  EXPECT_FALSE(f.leftAlone("c"));
  EXPECT_EQ(t.statusLine(), "1 devices tuned, 0 advised, 0 refused, 1 failed");
  app::absorb({{News::Forget, "a", ""}, {News::Tuned, "a", "id-a"}}, false, t, f);
  EXPECT_FALSE(f.leftAlone("a"));
  EXPECT_TRUE(f.leftAlone("b"));
  app::absorb({{News::Tuned, "c", ""}}, true, t, f);
  EXPECT_FALSE(f.leftAlone("b"));
  EXPECT_EQ(t.statusLine(), "1 devices tuned, 0 advised, 0 refused, 0 failed");
}

// Work cut short (its worker died in it twice) is not nothing done: the devices of a batch count
// as failed and are left alone until a re-plug, and a pass over the whole host keeps what was known
// and says it was cut short until a whole pass ends.
TEST(DeviceTallies, WorkCutShortCountsAsFailedNotAsNothingDone) {
  using namespace std::chrono_literals;
  app::DeviceTallies t;
  app::HotplugFilter f{1ms};
  app::absorb({{News::Tuned, "a", "id-a"}, {News::Tuned, "b", "id-b"}}, true, t, f);
  app::absorbCutShort({"b", "c"}, false, t, f);
  EXPECT_EQ(t.statusLine(), "1 devices tuned, 0 advised, 0 refused, 2 failed");
  EXPECT_TRUE(t.anyFailed());
  EXPECT_FALSE(f.leftAlone("a"));
  EXPECT_TRUE(f.leftAlone("b"));
  EXPECT_TRUE(f.leftAlone("c"));
  EXPECT_TRUE(t.removed("b"));  // it keeps its identity through the failure: a tuned one went
  EXPECT_EQ(t.departed().count("id-b"), 1U);

  app::absorbCutShort({}, true, t, f);
  EXPECT_EQ(t.statusLine(),
            "1 devices tuned, 0 advised, 0 refused, 1 failed; the pass over the whole host was cut short (the "
            "journal says why; systemctl reload iommud tries again)");
  app::absorb({{News::Tuned, "a", "id-a"}}, true, t, f);  // a whole pass that ends
  EXPECT_EQ(t.statusLine(), "1 devices tuned, 0 advised, 0 refused, 0 failed");
}

}  // namespace device_tallies_test
