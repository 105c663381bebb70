#pragma once

#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/pci_config.hpp"

namespace iommud::test {

namespace core = iommud::core;

/// Bytes from a hex dump as `xxd -p` or a table disassembly prints them; spaces and newlines are
/// ignored, so a dump can be laid out by field.
inline std::string hexBytes(std::string_view hex) {
  std::string out;
  int high = -1;
  for (char ch : hex) {
    if (std::isspace(static_cast<unsigned char>(ch)) != 0) continue;
    int v = std::isdigit(static_cast<unsigned char>(ch)) != 0 ? ch - '0' : (std::tolower(ch) - 'a' + 10);
    if (high < 0) {
      high = v;
    } else {
      out += static_cast<char>(high * 16 + v);
      high = -1;
    }
  }
  return out;
}

inline void put16(std::string& b, size_t at, uint16_t v) {
  b[at] = static_cast<char>(v & 0xff);
  b[at + 1] = static_cast<char>(v >> 8);
}

inline void put32(std::string& b, size_t at, uint32_t v) {
  put16(b, at, static_cast<uint16_t>(v & 0xffff));
  put16(b, at + 2, static_cast<uint16_t>(v >> 16));
}

/// A function's config space as root reads it (4096 bytes; `size` cuts it as a shorter read
/// would): the capability list with a PCIe capability of the given port type at 0x40 (behind a
/// power-management one at 0x50 when `chained`), and, when `acs`, an AER capability at 0x100
/// followed by ACS at 0x148 (the layout of pci_regs.h, docs/kernel.md §11.3).
inline std::string pciConfigBytes(core::PcieType type, bool multifunction, std::optional<core::Acs> acs,
                                  bool chained = false, size_t size = 4096) {
  std::string b(4096, '\0');
  put16(b, 0x00, 0x8086);
  put16(b, 0x02, 0x7a38);
  put16(b, 0x06, 0x0010);  // status: capability list
  b[0x0e] = static_cast<char>(
      (type == core::PcieType::RootPort || type == core::PcieType::Downstream || type == core::PcieType::Upstream
           ? 0x01
           : 0x00) |
      (multifunction ? 0x80 : 0x00));
  if (chained) {
    b[0x34] = 0x50;
    b[0x50] = 0x01;  // power management
    b[0x51] = 0x40;
  } else {
    b[0x34] = 0x40;
  }
  b[0x40] = 0x10;
  b[0x41] = 0x00;
  put16(b, 0x42, static_cast<uint16_t>(0x0002 | (static_cast<unsigned>(type) << 4)));
  if (acs) {
    put32(b, 0x100, 0x14810001);  // AER, version 1, next at 0x148
    put32(b, 0x148, 0x0001000d);  // ACS, version 1, last
    put16(b, 0x14c, acs->capability);
    put16(b, 0x14e, acs->control);
  }
  return b.substr(0, size);
}

}  // namespace iommud::test
