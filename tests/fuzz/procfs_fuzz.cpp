// libFuzzer target: the /proc parsers (mountinfo, swaps, routes, if_inet6, kernel config). All
// run over the same input so one corpus entry exercises each of them.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/procfs.hpp"

using namespace iommud::core;  // NOLINT(google-build-using-namespace): a fuzz target, nothing else here

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  (void)parseMountInfo(text);
  (void)parseSwaps(text);
  (void)parseGlobalInet6Interfaces(text);
  (void)parseKconfig(text, isIommuConfigSymbol);
  (void)parseKconfig(text, [](std::string_view) { return true; });

  // route and ipv6_route are two files: split the input at a point the fuzzer chooses.
  FuzzedDataProvider in(data, size);
  std::string ipv4 = in.ConsumeRandomLengthString(size);
  std::string ipv6 = in.ConsumeRemainingBytesAsString();
  (void)parseRouteInterfaces(ipv4, ipv6);
  return 0;
}
