// libFuzzer target: the DMAR and IVRS decoders over any bytes, with the signature forced in half
// of the runs so the walk over IVRS subtables is reached, and every accessor of what they accept.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/acpi_tables.hpp"

using namespace iommud::core;  // NOLINT(google-build-using-namespace): a fuzz target, nothing else here

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  volatile unsigned sink = 0;
  for (const char* signature : {"", "DMAR", "IVRS"}) {
    std::string t = bytes;
    if (*signature != '\0' && t.size() >= 4) t.replace(0, 4, signature);
    if (auto d = parseDmar(t)) {
      sink = sink + d->hostAddressWidth + d->interruptRemapping() + d->x2apicOptOut() + d->platformOptIn();
    }
    if (auto i = parseIvrs(t)) {
      // Each IVHD is at least 24 bytes, after a 48-byte start: more than the input holds is a bug.
      if (!i->ivhds.empty() && 48 + i->ivhds.size() * 24 > t.size()) std::abort();
      sink = sink + i->efrSupported() + i->dmaRemapOptIn() + i->physicalAddressSize() + i->virtualAddressSize() +
             i->kernelIvhdType() + i->hostTranslationDisabled();
      for (const auto& h : i->ivhds) sink = sink + h.hostTranslationDisabled() + h.x2apic() + h.segment;
    }
  }
  (void)sink;
  return 0;
}
