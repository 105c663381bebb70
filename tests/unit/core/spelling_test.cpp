#include "core/spelling.hpp"

#include <gtest/gtest.h>

namespace spelling_test {

using iommud::core::editDistance;
using iommud::core::nearestWord;

const std::vector<std::string> kCommands{"status", "snapshot", "check", "plan", "explain", "apply", "revert", "top"};

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(editDistance("status", "status"), 0U);
  EXPECT_EQ(editDistance("", "top"), 3U);
  EXPECT_EQ(editDistance("plan", ""), 4U);
  EXPECT_EQ(editDistance("stauts", "status"), 1U);  // a swap is one edit
  EXPECT_EQ(editDistance("--jsn", "--json"), 1U);
  EXPECT_EQ(editDistance("aply", "apply"), 1U);
  EXPECT_EQ(editDistance("chekc", "check"), 1U);
  EXPECT_EQ(editDistance("revret", "revert"), 1U);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3U);
  EXPECT_EQ(editDistance("ca", "abc"), 3U);  // no edit of a swapped pair again
}

TEST(EditDistance, IsTheSameBothWays) {
  for (const auto& a : kCommands) {
    for (const auto& b : kCommands) EXPECT_EQ(editDistance(a, b), editDistance(b, a)) << a << " " << b;
  }
}

TEST(NearestWord, SuggestsTheCommandAMisspellingMeant) {
  EXPECT_EQ(nearestWord("stauts", kCommands), "status");
  EXPECT_EQ(nearestWord("stats", kCommands), "status");
  EXPECT_EQ(nearestWord("pln", kCommands), "plan");
  EXPECT_EQ(nearestWord("tpo", kCommands), "top");
  EXPECT_EQ(nearestWord("explian", kCommands), "explain");
  EXPECT_EQ(nearestWord("snapshto", kCommands), "snapshot");
  EXPECT_EQ(nearestWord("--colour", {"--color", "--json", "--format"}), "--color");
}

TEST(NearestWord, SuggestsTheOneCommandAWordBegins) {
  EXPECT_EQ(nearestWord("snap", kCommands), "snapshot");
  EXPECT_EQ(nearestWord("--meas", {"--json", "--measure"}), "--measure");
  EXPECT_EQ(nearestWord("sta", {"status", "start"}), std::nullopt);  // either
}

TEST(NearestWord, SuggestsNothingForAWordFarFromAll) {
  EXPECT_EQ(nearestWord("install", kCommands), std::nullopt);
  EXPECT_EQ(nearestWord("x", kCommands), std::nullopt);
  EXPECT_EQ(nearestWord("-x", {"-h", "-V"}), std::nullopt);
  EXPECT_EQ(nearestWord("--device", {"--format", "--json", "--color", "--measure", "--root"}), std::nullopt);
  EXPECT_EQ(nearestWord("status", {}), std::nullopt);
}

TEST(NearestWord, TakesTheFirstOfEquallyNearCandidates) {
  EXPECT_EQ(nearestWord("pan", {"plan", "span"}), "plan");
  EXPECT_EQ(nearestWord("pan", {"span", "plan"}), "span");
}

}  // namespace spelling_test
