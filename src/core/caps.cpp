#include "core/caps.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/text.hpp"

namespace iommud::core {
std::optional<uint64_t> parseHex64(std::string_view text) {
  text = trim(text);
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  if (text.empty() || text.size() > 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    unsigned digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    value = (value << 4) | digit;
  }
  return value;
}

std::vector<std::string> IntelCaps::superPageSizes() const {
  std::vector<std::string> sizes;
  if (superPage2M()) sizes.emplace_back("2M");
  if (superPage1G()) sizes.emplace_back("1G");
  return sizes;
}

std::optional<AmdFeatures> parseAmdFeatures(std::string_view text) {
  text = trim(text);
  auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    auto efr = parseHex64(text);
    if (!efr) return std::nullopt;
    return AmdFeatures{*efr, std::nullopt};
  }
  auto efr2 = parseHex64(text.substr(0, colon));
  auto efr = parseHex64(text.substr(colon + 1));
  if (!efr || !efr2) return std::nullopt;
  return AmdFeatures{*efr, *efr2};
}

bool needsRwbfQuirk(uint16_t vendorId, uint16_t deviceId) {
  // drivers/iommu/intel/iommu.c, DECLARE_PCI_FIXUP_HEADER(PCI_VENDOR_ID_INTEL, ..., quirk_iommu_rwbf).
  static constexpr std::array<uint16_t, 7> kDevices = {0x2a40, 0x2e00, 0x2e10, 0x2e20, 0x2e30, 0x2e40, 0x2e90};
  return vendorId == 0x8086 && std::find(kDevices.begin(), kDevices.end(), deviceId) != kDevices.end();
}

}  // namespace iommud::core
