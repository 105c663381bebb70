#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace iommud::core {

/// The `width` bytes (at most 4) at `at` of `b` as a little-endian number, as ACPI tables (ACPI 6.5
/// §5.2) and PCI config space store them. The caller has checked that they are there.
inline uint32_t littleEndian(std::string_view b, size_t at, size_t width) {
  uint32_t v = 0;
  for (size_t i = width; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

}  // namespace iommud::core
