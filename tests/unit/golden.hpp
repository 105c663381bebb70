#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace iommud::testing {

/// Compares text with tests/data/<relative>; IOMMUD_UPDATE_GOLDEN=1 rewrites the file instead,
/// except under CI (`CI` set), where that mode fails: a rewritten golden file passes whatever the
/// output is, so it is regenerated on purpose and reviewed, never in a pipeline.
/// A mismatch names the first differing line rather than dumping both documents.
inline void expectGolden(const std::string& relative, const std::string& text) {
  std::string path = std::string(IOMMUD_TEST_DATA) + "/" + relative;
  if (std::getenv("IOMMUD_UPDATE_GOLDEN") != nullptr) {
    if (const char* ci = std::getenv("CI"); ci != nullptr) {
      FAIL() << "IOMMUD_UPDATE_GOLDEN is set and so is CI (=" << ci << "): golden files are not rewritten "
             << "under CI, where every golden test would pass; regenerate them by hand and review the diff";
    }
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file " << path << " (run with IOMMUD_UPDATE_GOLDEN=1)";
  std::string expected((std::istreambuf_iterator<char>(in)), {});
  if (text == expected) return;
  std::istringstream a(text);
  std::istringstream b(expected);
  std::string la;
  std::string lb;
  for (int line = 1;; ++line) {
    bool moreA = static_cast<bool>(std::getline(a, la));
    bool moreB = static_cast<bool>(std::getline(b, lb));
    if (!moreA && !moreB) break;
    if (la != lb || moreA != moreB) {
      ADD_FAILURE() << path << ":" << line << ": output changed; review and regenerate with "
                    << "IOMMUD_UPDATE_GOLDEN=1\n  expected: " << lb << "\n    actual: " << la;
      return;
    }
  }
}

}  // namespace iommud::testing
