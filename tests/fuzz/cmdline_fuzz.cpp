// libFuzzer target: the kernel command-line splitter and the IOMMU option interpreter.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/cmdline.hpp"

using namespace iommud::core;  // NOLINT(google-build-using-namespace): a fuzz target, nothing else here

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto params = parseCmdline(text);

  size_t related = 0;
  for (const auto& p : params) {
    // Every parameter is a piece of the input: nothing is invented or lost outside the quotes.
    if (p.text.empty() || text.find(p.text) == std::string_view::npos) {
      std::fprintf(stderr, "parseCmdline produced a parameter not in the input: \"%s\"\n", p.text.c_str());
      std::abort();
    }
    if (isIommuRelated(p.key)) ++related;
    if (p.value) (void)parseKernelBool(*p.value);
  }

  for (Arch arch : {Arch::Unknown, Arch::X86, Arch::Arm64, Arch::Other}) {
    auto iommu = interpretIommuCmdline(params, arch);
    // The interpreter lists every IOMMU-related parameter it was given, and nothing else.
    if (iommu.params.size() != related) {
      std::fprintf(stderr, "interpretIommuCmdline (%s) listed %zu parameters, %zu are IOMMU-related\n",
                   std::string(toString(arch)).c_str(), iommu.params.size(), related);
      std::abort();
    }
  }
  return 0;
}
