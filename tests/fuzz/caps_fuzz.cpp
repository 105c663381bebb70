// libFuzzer target: the hex register parser and the AMD features parser, plus every decode
// accessor over whatever they accept.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/caps.hpp"
#include "core/text.hpp"

using namespace iommud::core;  // NOLINT(google-build-using-namespace): a fuzz target, nothing else here

namespace {

// Calls every accessor so that a decode bug (shift past 63, a bad table index) shows up under UBSan.
unsigned decodeAll(const IntelCaps& c) {
  unsigned n = c.numDomainsLog2() + c.sagaw() + c.mgaw();
  n += static_cast<unsigned>(c.rwbf() + c.cachingMode() + c.superPage2M() + c.superPage1G() +
                             c.pageSelectiveInvalidation() + c.firstLevel1G() + c.postedInterrupts());
  n += static_cast<unsigned>(c.coherent() + c.queuedInvalidation() + c.deviceTlb() + c.interruptRemapping() +
                             c.passThrough() + c.snoopControl() + c.pasid() + c.scalableMode() +
                             c.secondLevelTranslation() + c.firstLevelTranslation());
  return n + static_cast<unsigned>(c.superPageSizes().size());
}

unsigned decodeAll(const AmdCaps& c) {
  return c.hostAddressTranslationLevels() +
         static_cast<unsigned>(c.iotlb() + c.npCache() + c.efrSupported() + c.guestTranslation() + c.ppr());
}

// What parseHex64 accepted must print back as itself: same digits, leading zeros dropped.
void checkRoundTrip(std::string_view text, uint64_t value) {
  text = trim(text);
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  std::string want;
  for (char ch : text) want += static_cast<char>(ch >= 'A' && ch <= 'F' ? ch - 'A' + 'a' : ch);
  want.erase(0, want.find_first_not_of('0'));
  if (want.empty()) want = "0";
  char got[17];
  std::snprintf(got, sizeof got, "%llx", static_cast<unsigned long long>(value));
  if (want != got) {
    std::fprintf(stderr, "parseHex64 round trip: \"%s\" gave %s\n", want.c_str(), got);
    std::abort();
  }
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto value = parseHex64(text);
  if (value) checkRoundTrip(text, *value);

  // sysfs gives cap and ecap as two files; a space or newline in the input splits them here.
  auto sep = text.find_first_of(" \n");
  auto cap = parseHex64(text.substr(0, sep));
  auto ecap = sep == std::string_view::npos ? std::nullopt : parseHex64(text.substr(sep + 1));
  volatile unsigned sink = decodeAll(IntelCaps{cap.value_or(0), ecap.value_or(value.value_or(0))});

  if (auto features = parseAmdFeatures(text)) {
    sink = sink + decodeAll(AmdCaps{static_cast<uint32_t>(cap.value_or(0)), features->efr, features->efr2});
  }
  (void)sink;
  return 0;
}
