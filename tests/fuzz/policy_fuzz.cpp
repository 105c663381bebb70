// libFuzzer target: the policy loader (config::parsePolicyText), from bytes to rules and
// diagnostics. Beyond "no crash, no hang, no sanitizer report" it checks what callers rely on:
// every diagnostic has a message, names the file, and points at a place inside the input; every
// rule it returns is one the validator accepted (named, described, doing something).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "config/policy_loader.hpp"

using namespace iommud;  // NOLINT(google-build-using-namespace): a fuzz target, nothing else here

namespace {

[[noreturn]] void fail(const char* what, const config::Diagnostic* d = nullptr) {
  if (d != nullptr) {
    std::fprintf(stderr, "policy_fuzz: %s: line %d column %d: \"%s\"\n", what, d->where.line, d->where.column,
                 d->message.c_str());
  } else {
    std::fprintf(stderr, "policy_fuzz: %s\n", what);
  }
  __builtin_trap();
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string file = "fuzz.toml";

  config::ParsedFile parsed = config::parsePolicyText(text, file);

  const auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  for (const auto& d : parsed.diagnostics) {
    if (d.message.empty()) fail("diagnostic without a message", &d);
    if (d.where.file != file) fail("diagnostic names another file", &d);
    if (d.where.line < 0 || d.where.column < 0) fail("negative line or column", &d);
    if (d.where.line > lines + 1) fail("line past the end of the input", &d);
    if (d.str().empty()) fail("empty diagnostic line", &d);
  }

  // Rules come back only when their table validated: a name, a description and an action.
  for (const auto& r : parsed.rules) {
    bool acts = r.domain || !r.rings.empty() || !r.channels.empty() || !r.coalesce.empty() || !r.params.empty();
    if (r.name.empty() || r.description.empty() || !acts) fail("an invalid rule was returned");
    if (r.where.file != file || r.where.line < 1 || r.where.line > lines + 1) fail("a rule with a bad location");
  }
  for (const auto& o : parsed.overrides) {
    if (o.rule.empty()) fail("an override without a rule name was returned");
  }
  return 0;
}
