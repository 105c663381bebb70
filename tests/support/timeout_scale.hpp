#pragma once

#include <chrono>
#include <cstdlib>
#include <string>

namespace iommud::testing {

/// IOMMUD_TEST_TIMEOUT_SCALE (default 1): the one factor of every test deadline, as in
/// tests/daemon/testbed.py. A deadline only bounds how long a failing test takes; tests wait for
/// events.
inline double timeoutScale() {
  const char* text = std::getenv("IOMMUD_TEST_TIMEOUT_SCALE");
  if (text == nullptr || *text == '\0') return 1.0;
  double scale = std::strtod(text, nullptr);
  return scale > 0 ? scale : 1.0;
}

/// `d` on this machine: times IOMMUD_TEST_TIMEOUT_SCALE.
template <class Rep, class Period>
std::chrono::steady_clock::duration scaled(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(d * timeoutScale());
}

}  // namespace iommud::testing
