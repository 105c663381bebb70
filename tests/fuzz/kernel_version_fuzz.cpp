// libFuzzer target: kernel version parsing, the upstream-version search over release,
// /proc/version and /proc/version_signature, and version-range sets.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/kernel_version.hpp"

using namespace iommud::core;  // NOLINT(google-build-using-namespace): a fuzz target, nothing else here

namespace {

[[noreturn]] void fail(const char* what, const std::string& input) {
  std::fprintf(stderr, "%s: \"%s\"\n", what, input.c_str());
  std::abort();
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string release = in.ConsumeRandomLengthString(256);
  std::string procVersion = in.ConsumeRandomLengthString(1024);
  std::string signature = in.ConsumeRandomLengthString(256);
  std::string rangeText = in.ConsumeRemainingBytesAsString();

  // A parsed version prints as "X.Y.Z", which must parse back to itself.
  if (auto v = parseKernelVersion(release)) {
    if (parseKernelVersion(v->str()) != v) fail("parseKernelVersion round trip", release);
  }

  auto up = upstreamVersion(release, procVersion, signature);
  if (up.version.has_value() != (up.source != VersionSource::Unknown)) fail("upstreamVersion source", procVersion);
  (void)toString(up.source);

  auto set = VersionSet::parse(rangeText);
  if (!set) {
    if (set.error().message.empty()) fail("VersionSet::parse error without message", rangeText);
    return 0;
  }
  for (const auto& conj : set->alternatives()) {
    if (conj.empty()) fail("VersionSet::parse produced an empty alternative", rangeText);
    // An alternative with a single inclusive bound contains that bound's own version.
    const auto& b = conj.front();
    using Op = VersionSet::Bound::Op;
    bool inclusive = b.op == Op::Le || b.op == Op::Ge || b.op == Op::Eq;
    if (conj.size() == 1 && inclusive && !set->contains(b.version)) fail("VersionSet misses its own bound", rangeText);
  }
  if (up.version) (void)set->contains(*up.version);
  return 0;
}
