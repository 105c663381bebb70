// libFuzzer target: the initramfs listing parser. The fuzzer chooses the release and the listing.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/initramfs.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string release = in.ConsumeRandomLengthString(64);
  std::string listing = in.ConsumeRemainingBytesAsString();
  auto parsed = iommud::core::parseInitramfsListing(listing, release);
  for (const auto& m : parsed.modules) {
    if (m.empty() || m.find('-') != std::string::npos || m.find('/') != std::string::npos) __builtin_trap();
  }
  if (parsed.modules.size() > parsed.entries) __builtin_trap();
  return 0;
}
