#include "core/backoff.hpp"

namespace iommud::core {

std::chrono::milliseconds Backoff::delay(unsigned retry) const {
  if (first.count() <= 0) return std::chrono::milliseconds{0};
  std::chrono::milliseconds d = first;
  // Doubles until the ceiling: no shift that could overflow, whatever the count.
  for (unsigned i = 0; i < retry && d < ceiling; ++i) d *= 2;
  return d < ceiling ? d : ceiling;
}

}  // namespace iommud::core
