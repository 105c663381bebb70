// Issue 28, point 5: policy parsing is linear. Times config::parsePolicyText on generated policy
// files of several shapes, from 1 KiB up to the 256 KiB limit (kMaxPolicyBytes), and prints each
// time beside its ratio to the same shape's 1 KiB file: linear parsing keeps the ratio near the
// ratio of the sizes (256 at the limit), a quadratic one near its square.
//
// The shapes are what a large file can be made of: one long array on one line, of integers, of basic
// strings (refused past kMaxBasicStringsPerLine: toml11 copies the line for each), of literal
// strings, lines of as many inline tables or basic strings as a line may hold, many tables, many
// rules, one long string, one of escapes, and arrays nested 16 deep (the limit). The last is not a valid policy (arrays
// where integers belong): its diagnostics are part of what is timed, as `iommuctl check` and a reload pay for them.
//
// Usage: bench_parse [--max-kib=N] [--min-ms=X] [--shape=NAME] [--dump=NAME:KIB]
//   --max-kib stops at a smaller size (the sizes are 1, 4, 16, 64 and 256 KiB).
//   --min-ms repeats each parse until this much CPU time has passed (default 200), at least 3
//     times, and reports the median.
//   --dump prints one generated file and exits.
// Exits 1 when a 256 KiB file takes a second or more (median CPU time).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/policy_loader.hpp"

namespace {

using namespace iommud;  // NOLINT(google-build-using-namespace): a benchmark, nothing else here

constexpr size_t kKiB = 1024;
constexpr double kLimitMs = 1000.0;

const std::string kRule = "[[rule]]\nname = \"big\"\ndescription = \"A generated rule\"\ndomain = \"identity\"\n";
const std::string kHead = kRule + "[rule.match]\n";

// Appends `unit(i)` for i = 0, 1, ... while the text stays within `size` bytes with `tail` after it.
std::string fill(std::string text, size_t size, std::string_view tail, const std::function<std::string(size_t)>& unit) {
  for (size_t i = 0;; ++i) {
    std::string u = unit(i);
    if (text.size() + u.size() + tail.size() > size) break;
    text += u;
  }
  return text + std::string(tail);
}

// One array of the string "ab" in `quote`s on one line, as long as `size` allows.
std::string stringsLine(size_t size, char quote) {
  const std::string ab = std::string(1, quote) + "ab" + quote;
  return fill(kRule + "[rule.match]\nkind = \"nvme\"\n[[rule.unless]]\nname = [" + ab, size, "]\n",
              [&](size_t) { return "," + ab; });
}

struct Shape {
  const char* name;
  const char* what;
  std::function<std::string(size_t)> make;
};

std::vector<Shape> shapes() {
  return {
      {"array", "one array of integers on one line",
       [](size_t size) { return fill(kHead + "vendor = [1", size, "]\n", [](size_t) { return std::string(",1"); }); }},
      {"inline-tables", "lines of 64 inline tables (the most keys one line may hold)",
       [](size_t size) {
         return fill(kRule + "unless = [\n", size, "]\n[rule.match]\nkind = \"nic\"\n", [](size_t i) {
           return "{ name = \"eth" + std::to_string(i) + "\" }," + (i % config::kMaxKeysPerLine == 63 ? "\n" : " ");
         });
       }},
      {"tables", "one rule with many [[rule.unless]] tables",
       [](size_t size) {
         return fill(kHead + "kind = \"nic\"\n", size, "",
                     [](size_t i) { return "[[rule.unless]]\nname = \"eth" + std::to_string(i) + "\"\n"; });
       }},
      {"rules", "many rules (at most 1000: long descriptions)",
       [](size_t size) {
         const std::string padding(180, 'x');
         return fill("", size, "", [&](size_t i) {
           return "[[rule]]\nname = \"r" + std::to_string(i) + "\"\ndescription = \"" + padding +
                  "\"\ndomain = \"identity\"\n[rule.match]\nvendor = 0x8086\n\n";
         });
       }},
      {"string", "one rule with a long description",
       [](size_t size) {
         return fill("[[rule]]\nname = \"big\"\ndomain = \"identity\"\ndescription = \"", size, "\"\n",
                     [](size_t) { return std::string("abcdefghijklmnop"); });
       }},
      {"strings", "one array of basic strings on one line", [](size_t size) { return stringsLine(size, '"'); }},
      {"string-lines", "lines of 128 basic strings (the most one line may hold)",
       [](size_t size) {
         return fill(kRule + "[rule.match]\nkind = \"nvme\"\n[[rule.unless]]\nname = [\n", size, "]\n", [](size_t i) {
           return std::string("\"ab\",") + (i % config::kMaxBasicStringsPerLine == 127 ? "\n" : " ");
         });
       }},
      {"literals", "one array of literal strings on one line", [](size_t size) { return stringsLine(size, '\''); }},
      {"escapes", "one rule with a long description of escapes",
       [](size_t size) {
         return fill("[[rule]]\nname = \"big\"\ndomain = \"identity\"\ndescription = \"", size, "\"\n",
                     [](size_t) { return std::string("a\\n\\t\\u00e9\\\""); });
       }},
      {"nesting", "arrays nested 16 deep, side by side on one line",
       [](size_t size) {
         const std::string nested = std::string(15, '[') + "1" + std::string(15, ']');
         return fill(kHead + "vendor = [" + nested, size, "]\n", [&](size_t) { return "," + nested; });
       }},
  };
}

// The CPU time of this thread: what parsing costs, without what other processes take.
double cpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The median CPU time of parsing `text`, repeated for `minMs` and at least three times.
double medianMs(const std::string& text, double minMs, size_t& sink) {
  std::vector<double> ms;
  double total = 0;
  while (ms.size() < 3 || total < minMs) {
    double start = cpuMs();
    auto parsed = config::parsePolicyText(text, "bench.toml");
    ms.push_back(cpuMs() - start);
    total += ms.back();
    sink += parsed.rules.size() + parsed.diagnostics.size();
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int run(int argc, char** argv) {
  size_t maxKib = config::kMaxPolicyBytes / kKiB;
  double minMs = 200;
  std::string only;
  std::string dump;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.starts_with("--max-kib=")) maxKib = std::strtoul(argv[i] + 10, nullptr, 10);
    if (a.starts_with("--min-ms=")) minMs = std::atof(argv[i] + 9);
    if (a.starts_with("--shape=")) only = a.substr(8);
    if (a.starts_with("--dump=")) dump = a.substr(7);
  }
  const std::vector<size_t> sizes = {1, 4, 16, 64, 256};
  auto all = shapes();
  if (!dump.empty()) {
    auto colon = dump.find(':');
    for (const auto& s : all) {
      if (dump.substr(0, colon) == s.name)
        std::fputs(s.make(std::strtoul(dump.c_str() + colon + 1, nullptr, 10) * kKiB).c_str(), stdout);
    }
    return 0;
  }

  std::printf("%-13s %-9s %10s %10s %8s  %s\n", "shape", "size", "bytes", "cpu ms", "ratio", "diagnostics");
  size_t sink = 0;
  double worst = 0;
  for (const auto& shape : all) {
    if (!only.empty() && only != shape.name) continue;
    double base = 0;
    for (size_t kib : sizes) {
      if (kib > maxKib) break;
      const std::string text = shape.make(kib * kKiB);
      const auto diagnostics = config::parsePolicyText(text, "bench.toml").diagnostics.size();
      double ms = medianMs(text, minMs, sink);
      if (kib == 1) base = ms;
      std::printf("%-13s %4zu KiB  %10zu %10.3f %8.1f  %zu\n", shape.name, kib, text.size(), ms,
                  base > 0 ? ms / base : 0.0, diagnostics);
      std::fflush(stdout);
      if (kib * kKiB == config::kMaxPolicyBytes) worst = std::max(worst, ms);
    }
    std::printf("%-13s (%s)\n", "", shape.what);
  }
  std::printf("(%zu results)\n", sink);
  if (worst >= kLimitMs) {
    std::fprintf(stderr, "bench_parse: FAILED: a 256 KiB policy took %.1f ms of CPU to parse, over %.0f ms\n", worst,
                 kLimitMs);
    return 1;
  }
  if (worst > 0) std::printf("\nworst 256 KiB parse: %.1f ms of CPU (limit %.0f ms)\n", worst, kLimitMs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try { return run(argc, argv); } catch (const std::exception& e) {
  std::fprintf(stderr, "bench_parse: %s\n", e.what());
  return 1;
}
