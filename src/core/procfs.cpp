#include "core/procfs.hpp"

#include <algorithm>

#include "core/text.hpp"

namespace iommud::core {
namespace {

// mountinfo and swaps escape space, tab, newline and backslash as \040 etc.
std::string unescapeOctal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto isOct = [](char c) { return c >= '0' && c <= '7'; };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && isOct(s[i + 1]) && isOct(s[i + 2]) && isOct(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += s[i];
  }
  return out;
}

std::string_view baseName(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::vector<Mount> parseMountInfo(std::string_view text) {
  std::vector<Mount> mounts;
  for (auto line : split(text, '\n')) {
    auto f = words(line);
    // id parent major:minor root mountpoint options [optional...] - fstype source superopts
    if (f.size() < 7) continue;
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 2 >= f.size()) continue;
    mounts.push_back(
        Mount{std::string(f[2]), unescapeOctal(f[4]), unescapeOctal(f[dash + 2]), std::string(f[dash + 1])});
  }
  return mounts;
}

std::vector<std::string> parseSwaps(std::string_view text) {
  std::vector<std::string> out;
  bool header = true;
  for (auto line : split(text, '\n')) {
    if (header) {  // "Filename Type Size Used Priority"
      header = false;
      continue;
    }
    auto f = words(line);
    if (f.size() < 2 || f[1] != "partition") continue;
    out.emplace_back(baseName(unescapeOctal(f[0])));
  }
  return out;
}

std::set<std::string> parseRouteInterfaces(std::string_view ipv4, std::string_view ipv6) {
  std::set<std::string> out;
  bool header = true;
  for (auto line : split(ipv4, '\n')) {
    if (header) {  // "Iface Destination Gateway ..."
      header = false;
      continue;
    }
    auto f = words(line);
    if (!f.empty() && f[0] != "*") out.emplace(f[0]);
  }
  // dest dest_len src src_len next_hop metric refcnt use flags iface
  for (auto line : split(ipv6, '\n')) {
    auto f = words(line);
    if (f.size() >= 10 && f[9] != "lo") out.emplace(f[9]);
  }
  return out;
}

std::set<std::string> parseGlobalInet6Interfaces(std::string_view text) {
  // address ifindex prefixlen scope flags name; scope 0x20 is link-local, 0x10 host.
  std::set<std::string> out;
  for (auto line : split(text, '\n')) {
    auto f = words(line);
    if (f.size() < 6) continue;
    if (f[3] == "20" || f[3] == "10") continue;
    out.emplace(f[5]);
  }
  return out;
}

std::map<std::string, std::string> parseKconfig(std::string_view text, bool (*keep)(std::string_view name)) {
  std::map<std::string, std::string> out;
  for (auto raw : split(text, '\n')) {
    auto line = trim(raw);
    if (line.starts_with("# CONFIG_") && line.ends_with(" is not set")) {
      auto name = line.substr(2, line.size() - 2 - 11);
      if (keep(name)) out[std::string(name)] = "n";
      continue;
    }
    if (!line.starts_with("CONFIG_")) continue;
    auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    auto name = line.substr(0, eq);
    if (keep(name)) out[std::string(name)] = std::string(line.substr(eq + 1));
  }
  return out;
}

bool isIommuConfigSymbol(std::string_view name) {
  return name.find("IOMMU") != std::string_view::npos || name.find("SMMU") != std::string_view::npos ||
         name.find("SWIOTLB") != std::string_view::npos || name.find("DMAR") != std::string_view::npos ||
         name == "CONFIG_AMD_MEM_ENCRYPT" || name == "CONFIG_AMD_MEM_ENCRYPT_ACTIVE_BY_DEFAULT";
}

Confidential parseConfidential(std::string_view cpuinfo) {
  for (auto line : split(cpuinfo, '\n')) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos || trim(line.substr(0, colon)) != "flags") continue;
    auto flags = words(line.substr(colon + 1));
    auto has = [&](std::string_view f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
    if (has("tdx_guest")) return Confidential::Tdx;
    if (!has("hypervisor")) return Confidential::None;
    if (has("sev_snp")) return Confidential::SevSnp;
    if (has("sev_es")) return Confidential::SevEs;
    return has("sev") ? Confidential::Sev : Confidential::None;
  }
  return Confidential::Unknown;
}

}  // namespace iommud::core
