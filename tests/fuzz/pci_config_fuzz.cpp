// libFuzzer target: the PCI config space decoder (both capability lists, bounded against loops)
// and the ACS decision over whatever it accepts, for every single flag and the isolation set.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/pci_config.hpp"

using namespace iommud::core;  // NOLINT(google-build-using-namespace): a fuzz target, nothing else here

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto c = parsePciConfig(bytes);
  if (!c) return 0;
  if (c->acs && !c->extendedRead) std::abort();  // ACS lives in the extended space only
  volatile unsigned sink = 0;
  for (uint16_t bit = 1; bit <= kAcsDirectTranslatedP2p; bit = static_cast<uint16_t>(bit << 1)) {
    auto on = acsEnabled(*c, bit);
    sink = sink + (on ? *on + 1U : 0U) + static_cast<unsigned>(acsBitName(static_cast<AcsBit>(bit)).size());
  }
  auto all = acsEnabled(*c, kAcsIsolationFlags);
  sink = sink + (all ? *all : 2U);
  (void)sink;
  return 0;
}
