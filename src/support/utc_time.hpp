#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace iommud::support {

/// The time now, UTC, ISO 8601 ("2026-12-02T16:21:14Z"): what records and reports carry.
inline std::string utcNow() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::string buf(sizeof "YYYY-MM-DDTHH:MM:SSZ", '\0');
  buf.resize(std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm));
  return buf;
}

}  // namespace iommud::support
