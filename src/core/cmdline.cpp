#include "core/cmdline.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/text.hpp"

namespace iommud::core {
namespace {

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The kernel treats '-' and '_' alike in parameter names (parameq()).
std::string normalizeKey(std::string_view key) {
  std::string out(key);
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

// Words of x86 iommu= (arch/x86/kernel/pci-dma.c iommu_setup() and gart_parse_options()). The
// kernel matches each by prefix with strncmp.
constexpr std::array kX86IommuWords{"off",        "force",   "noforce",  "biomerge",  "panic",       "nopanic",
                                    "merge",      "nomerge", "forcesac", "allowdac",  "nodac",       "usedac",
                                    "soft",       "pt",      "nopt",     "fullflush", "nofullflush", "noagp",
                                    "noaperture", "memaper", "calgary"};
// intel_iommu= (drivers/iommu/intel/iommu.c intel_iommu_setup()).
constexpr std::array kIntelWords{"on",     "off",   "igfx_off", "forcedac",     "strict",
                                 "sp_off", "sm_on", "sm_off",   "tboot_noforce"};
// amd_iommu= (drivers/iommu/amd/init.c parse_amd_iommu_options()).
constexpr std::array kAmdWords{"fullflush", "force_enable", "off",         "force_isolation", "pgtbl_v1",
                               "pgtbl_v2",  "irtcachedis",  "nohugepages", "v2_pgsizes_only", "gappi"};

template <size_t N>
bool knownByPrefix(std::string_view word, const std::array<const char*, N>& known) {
  return std::any_of(known.begin(), known.end(), [&](std::string_view k) { return startsWith(word, k); });
}

// What a user coming from x86 most likely wanted, in the generic parameters every architecture has.
std::string genericHint(const std::string& value) {
  for (auto word : split(value, ',')) {
    if (startsWith(word, "off") || startsWith(word, "pt"))
      return " (identity for every trusted device is iommu.passthrough=1)";
    if (startsWith(word, "nopt")) return " (translated DMA by default is iommu.passthrough=0)";
    if (startsWith(word, "strict") || startsWith(word, "fullflush")) return " (strict invalidation is iommu.strict=1)";
  }
  return "";
}

}  // namespace

std::vector<CmdlineParam> parseCmdline(std::string_view cmdline) {
  std::vector<CmdlineParam> out;
  size_t i = 0;
  while (i < cmdline.size()) {
    while (i < cmdline.size() && std::isspace(static_cast<unsigned char>(cmdline[i]))) ++i;
    if (i >= cmdline.size()) break;
    // A parameter runs to the next unquoted whitespace.
    size_t start = i;
    bool inQuote = false;
    while (i < cmdline.size() && (inQuote || !std::isspace(static_cast<unsigned char>(cmdline[i])))) {
      if (cmdline[i] == '"') inQuote = !inQuote;
      ++i;
    }
    std::string_view text = cmdline.substr(start, i - start);
    if (text == "--") break;
    std::string unquoted;
    for (char c : text) {
      if (c != '"') unquoted += c;
    }
    CmdlineParam param;
    param.text = std::string(text);
    auto eq = unquoted.find('=');
    if (eq == std::string::npos) {
      param.key = unquoted;
    } else {
      param.key = unquoted.substr(0, eq);
      param.value = unquoted.substr(eq + 1);
    }
    out.push_back(std::move(param));
  }
  return out;
}

std::optional<bool> parseKernelBool(std::string_view s) {
  if (s.empty()) return std::nullopt;
  switch (s[0]) {
    case 'y':
    case 'Y':
    case 't':
    case 'T':
    case '1': return true;
    case 'n':
    case 'N':
    case 'f':
    case 'F':
    case '0': return false;
    case 'o':
    case 'O':
      if (s.size() > 1 && (s[1] == 'n' || s[1] == 'N')) return true;
      if (s.size() > 1 && (s[1] == 'f' || s[1] == 'F')) return false;
      break;
    default: break;
  }
  return std::nullopt;
}

bool isIommuRelated(std::string_view rawKey) {
  std::string key = normalizeKey(rawKey);
  return key == "iommu" || startsWith(key, "iommu.") || key == "intel_iommu" || key == "amd_iommu" ||
         startsWith(key, "amd_iommu_") || key == "swiotlb" || key == "mem_encrypt" || key == "intremap" ||
         startsWith(key, "arm_smmu") || startsWith(key, "vfio") || key == "pci";
}

namespace {

// Reads the IOMMU parameters in their order, as the kernel does: the last of a pair wins.
class CmdlineReader {
 public:
  // x86's iommu= is an early_param of arch/x86 only (powerpc has an iommu= of its own); the
  // VT-d and AMD drivers build only for x86 (docs/kernel.md §1.5). An unknown arch reads as x86,
  // as iommud always did: there the command line cannot say more.
  explicit CmdlineReader(Arch arch) : arch_(arch), x86_(arch == Arch::X86 || arch == Arch::Unknown) {}

  void take(const CmdlineParam& p) {
    const std::string key = normalizeKey(p.key);
    if (!isIommuRelated(key)) return;
    out_.params.push_back(p.text);
    const std::string value = p.value.value_or("");
    if (!x86_ && (key == "intel_iommu" || key == "amd_iommu" || key == "iommu")) {
      notHere(key, p, value);
    } else if (key == "iommu.passthrough") {
      if (auto b = parseKernelBool(value)) {
        setPassthrough(*b, p.text);
      } else {
        badBool(p);
      }
    } else if (key == "iommu.strict") {
      if (auto b = parseKernelBool(value)) {
        out_.strict = *b;
        out_.strictBy = p.text;
      } else {
        badBool(p);
      }
    } else if (key == "iommu") {
      x86Iommu(p, value);
    } else if (key == "intel_iommu") {
      intelIommu(p, value);
    } else if (key == "amd_iommu") {
      amdIommu(p, value);
    } else if (key == "swiotlb") {
      for (auto word : split(value, ',')) {
        if (word == "noforce") out_.swiotlbNoforce = true;
      }
    } else if (key == "mem_encrypt") {
      if (value == "on") out_.memEncrypt = true;
      if (value == "off") out_.memEncrypt = false;
    }
  }

  IommuCmdline finish() && {
    if (out_.legacyStrict && out_.strict && !*out_.strict) {
      out_.issues.push_back({out_.strictBy, out_.legacyStrictBy + " takes precedence over " + out_.strictBy +
                                                ": invalidation stays strict"});
    }
    if (out_.iommuOff && out_.passthrough) {
      out_.issues.push_back(
          {out_.passthroughBy, "iommu=off disables the IOMMU on x86; " + out_.passthroughBy + " has no effect"});
    }
    return std::move(out_);
  }

 private:
  void setPassthrough(bool value, const std::string& by) {
    if (out_.passthrough && *out_.passthrough != value) {
      out_.issues.push_back({by, by + " overrides the earlier " + out_.passthroughBy +
                                     ": the kernel keeps the last of iommu=pt|nopt and "
                                     "iommu.passthrough="});
    }
    out_.passthrough = value;
    out_.passthroughBy = by;
  }

  void badBool(const CmdlineParam& p) {
    out_.issues.push_back({p.text, p.text + " is not a boolean (use 0 or 1): the kernel ignores it"});
  }

  // An x86 parameter on another architecture. The arm64 kernel does not know it: init/main.c
  // unknown_bootoption() hands it to init ("Unknown kernel command line parameters ..."), and
  // nothing changes. Another architecture's own iommu= is unknown to iommud.
  void notHere(const std::string& key, const CmdlineParam& p, const std::string& value) {
    if (key == "iommu" && arch_ != Arch::Arm64) return;
    std::string what = key == "iommu"         ? "x86's iommu= exists only there"
                       : key == "intel_iommu" ? "the VT-d driver is x86-only"
                                              : "the AMD-Vi driver is x86-only";
    std::string kernel = arch_ == Arch::Arm64 ? "the arm64 kernel" : "this architecture's kernel";
    out_.issues.push_back({p.text, p.text + " is not a parameter of " + kernel + " (" + what + "): it changes nothing" +
                                       genericHint(value)});
  }

  void x86Iommu(const CmdlineParam& p, const std::string& value) {
    for (auto word : split(value, ',')) {
      if (word.empty()) continue;
      if (!knownByPrefix(word, kX86IommuWords)) {
        out_.issues.push_back(
            {p.text, "iommu=" + std::string(word) + " is not an option the kernel knows: it is ignored"});
        continue;
      }
      // Mirror the kernel's prefix tests: "off..." sets no_iommu, "pt..." passthrough.
      if (startsWith(word, "off")) out_.iommuOff = true;
      if (startsWith(word, "force")) out_.iommuForce = true;
      if (startsWith(word, "noforce")) out_.iommuForce = false;
      if (startsWith(word, "pt")) setPassthrough(true, p.text);
      if (startsWith(word, "nopt")) setPassthrough(false, p.text);
    }
  }

  void intelIommu(const CmdlineParam& p, const std::string& value) {
    out_.intelGiven = true;
    for (auto word : split(value, ',')) {
      if (word.empty()) continue;
      if (!knownByPrefix(word, kIntelWords)) {
        out_.issues.push_back(
            {p.text, "intel_iommu=" + std::string(word) + " is not a valid option: the VT-d driver ignores it"});
        continue;
      }
      if (startsWith(word, "on")) out_.intelOn = true, out_.intelOnBy = p.text;
      if (startsWith(word, "off")) out_.intelOn = false, out_.intelOnBy = p.text;
      if (startsWith(word, "strict")) out_.legacyStrict = true, out_.legacyStrictBy = p.text;
      if (startsWith(word, "sm_on")) out_.intelScalableMode = true;
      if (startsWith(word, "sm_off")) out_.intelScalableMode = false;
    }
  }

  void amdIommu(const CmdlineParam& p, const std::string& value) {
    out_.amdGiven = true;
    for (auto word : split(value, ',')) {
      if (word.empty()) continue;
      if (!knownByPrefix(word, kAmdWords)) {
        // Current kernels log "AMD-Vi: Unknown option - '...'", older ones said nothing
        // (docs/kernel.md §11.2).
        std::string hint = word == "pt"   ? " (passthrough is iommu=pt)"
                           : word == "on" ? " (the AMD IOMMU is on by default when the firmware has an IVRS table)"
                                          : "";
        out_.issues.push_back(
            {p.text, "amd_iommu=" + std::string(word) + " is not a valid option: the AMD driver ignores it" + hint});
        continue;
      }
      if (startsWith(word, "fullflush")) out_.legacyStrict = true, out_.legacyStrictBy = p.text;
      if (startsWith(word, "off")) out_.amdOff = true;
      if (startsWith(word, "force_isolation")) out_.amdForceIsolation = true;
    }
  }

  Arch arch_;
  bool x86_;
  IommuCmdline out_;
};

}  // namespace

IommuCmdline interpretIommuCmdline(const std::vector<CmdlineParam>& params, Arch arch) {
  CmdlineReader reader(arch);
  for (const auto& p : params) reader.take(p);
  return std::move(reader).finish();
}

}  // namespace iommud::core
