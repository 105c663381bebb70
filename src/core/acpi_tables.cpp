#include "core/acpi_tables.hpp"

#include <algorithm>

#include "core/little_endian.hpp"

namespace iommud::core {
namespace {

uint64_t le64(std::string_view b, size_t at) {
  return (static_cast<uint64_t>(littleEndian(b, at + 4, 4)) << 32) | littleEndian(b, at, 4);
}

constexpr size_t kHeader = 36;  // the common ACPI table header

// The table's own length field, bounded by what was read.
std::optional<std::string_view> table(std::string_view bytes, std::string_view signature, size_t fixed) {
  if (bytes.size() < fixed || bytes.substr(0, 4) != signature) return std::nullopt;
  size_t length = littleEndian(bytes, 4, 4);
  if (length < fixed) return std::nullopt;
  return bytes.substr(0, std::min(length, bytes.size()));
}

}  // namespace

std::optional<DmarInfo> parseDmar(std::string_view bytes) {
  // Header, then Host Address Width (1 byte, width - 1), Flags (1 byte), 10 reserved.
  auto t = table(bytes, "DMAR", kHeader + 2);
  if (!t) return std::nullopt;
  DmarInfo d;
  d.hostAddressWidth = static_cast<unsigned char>((*t)[kHeader]) + 1U;
  d.flags = static_cast<uint8_t>((*t)[kHeader + 1]);
  return d;
}

uint8_t IvrsInfo::kernelIvhdType() const {
  uint8_t best = 0;
  for (const auto& h : ivhds) {
    if (h.type == 0x10 || h.type == 0x11 || h.type == 0x40) best = std::max(best, h.type);
  }
  return best;
}

bool IvrsInfo::hostTranslationDisabled() const {
  auto type = kernelIvhdType();
  return std::any_of(ivhds.begin(), ivhds.end(),
                     [&](const IvhdInfo& h) { return h.type == type && h.hostTranslationDisabled(); });
}

std::optional<IvrsInfo> parseIvrs(std::string_view bytes) {
  // Header, IVinfo (4 bytes), 8 reserved; subtables from offset 48, each with type (1), flags (1)
  // and length (2) first.
  constexpr size_t kFirst = 48;
  auto t = table(bytes, "IVRS", kHeader + 4);
  if (!t) return std::nullopt;
  IvrsInfo info;
  info.ivinfo = littleEndian(*t, kHeader, 4);
  size_t at = kFirst;
  while (at + 4 <= t->size()) {
    auto type = static_cast<uint8_t>((*t)[at]);
    size_t length = littleEndian(*t, at + 2, 2);
    if (length < 4 || at + length > t->size()) break;
    if (type == 0x10 || type == 0x11 || type == 0x40) {
      // IVHD: device id at 4, segment at 16, attributes at 20 (24 bytes for type 0x10), then for
      // 0x11/0x40 the EFR copy at 24 (40 bytes).
      size_t need = type == 0x10 ? 24 : 40;
      if (length < need) break;
      IvhdInfo h;
      h.type = type;
      h.deviceId = static_cast<uint16_t>(littleEndian(*t, at + 4, 2));
      h.segment = static_cast<uint16_t>(littleEndian(*t, at + 16, 2));
      h.attributes = littleEndian(*t, at + 20, 4);
      if (type != 0x10) h.efr = le64(*t, at + 24);
      info.ivhds.push_back(h);
    }
    at += length;
  }
  return info;
}

}  // namespace iommud::core
