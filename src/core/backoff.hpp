#pragma once

#include <chrono>

namespace iommud::core {

/// Exponential backoff for retrying what the world took away (the system bus): the wait before
/// retry n (0 for the first) is first * 2^n, never more than ceiling. Pure: the caller owns the
/// clock and counts the retries.
struct Backoff {
  std::chrono::milliseconds first{100};
  std::chrono::milliseconds ceiling{10'000};

  [[nodiscard]] std::chrono::milliseconds delay(unsigned retry) const;
};

}  // namespace iommud::core
