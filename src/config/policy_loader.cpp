#include "config/policy_loader.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>

#include "config/toml_support.hpp"
#include "core/findings.hpp"
#include "core/text.hpp"

namespace iommud::config {

using core::SourceLoc;
using Severity = Diagnostic::Severity;

std::string Diagnostic::str() const {
  // One line per diagnostic, whatever a quoted value held.
  std::string text = where.str() + (severity == Severity::Error ? ": error: " : ": warning: ");
  for (char c : message) {
    if (c == '\n')
      text += "\\n";
    else if (c == '\t')
      text += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20U)
      text += '?';
    else
      text += c;
  }
  return text;
}

bool Loaded::ok() const {
  return errors() == 0;
}

size_t Loaded::errors() const {
  return static_cast<size_t>(std::count_if(diagnostics.begin(), diagnostics.end(),
                                           [](const Diagnostic& d) { return d.severity == Severity::Error; }));
}

namespace {

using detail::joinNames;
using detail::typeName;

constexpr detail::TextRules kPolicyText{kMaxPolicyBytes, kMaxPolicyNesting, kMaxKeysPerLine, "policy files",
                                        "policies never need that"};

// Validates one policy file. Every check reports and goes on, so one run lists every mistake.
class FileParser : public detail::Checker {
 public:
  using Checker::Checker;

  void parseTop(const toml::value& top, ParsedFile& parsed) {
    forEachKey(top, "the top level", {"rule", "override"}, [&](const std::string& key, const toml::value& v) {
      if (!v.is_array() ||
          std::any_of(v.as_array().begin(), v.as_array().end(), [](const toml::value& e) { return !e.is_table(); })) {
        error(v, "'" + key + "' must be an array of tables, written [[" + key + "]]");
        return;
      }
      if (v.as_array().size() > kMaxEntriesPerFile) {
        error(v, std::to_string(v.as_array().size()) + " [[" + key + "]] entries in one file; at most " +
                     std::to_string(kMaxEntriesPerFile));
        return;
      }
      for (const auto& t : v.as_array()) {
        if (key == "rule") {
          if (auto r = parseRule(t)) parsed.rules.push_back(std::move(*r));
        } else {
          if (auto o = parseOverride(t)) parsed.overrides.push_back(std::move(*o));
        }
      }
    });
  }

 private:
  // A single value or an array of them; `one` validates and converts each element.
  template <class T>
  std::vector<T> list(const toml::value& v, const std::string& key,
                      const std::function<std::optional<T>(const toml::value&)>& one) {
    std::vector<T> out;
    if (v.is_array()) {
      if (v.as_array().empty()) error(v, "'" + key + "' is an empty array: it would match nothing");
      for (const auto& e : v.as_array()) {
        if (auto x = one(e)) out.push_back(std::move(*x));
      }
    } else if (auto x = one(v)) {
      out.push_back(std::move(*x));
    }
    return out;
  }

  std::vector<std::string> strings(
      const toml::value& v, const std::string& key,
      const std::function<std::optional<std::string>(const toml::value&, const std::string&)>& check) {
    return list<std::string>(v, key, [&](const toml::value& e) -> std::optional<std::string> {
      auto s = string(e, key);
      if (!s) return std::nullopt;
      if (s->empty()) {
        error(e, "'" + key + "' must not be empty");
        return std::nullopt;
      }
      return check ? check(e, *s) : s;
    });
  }

  std::vector<core::Glob> globs(const toml::value& v, const std::string& key) {
    auto texts = strings(v, key, nullptr);
    return {std::make_move_iterator(texts.begin()), std::make_move_iterator(texts.end())};
  }

  std::vector<uint16_t> ids(const toml::value& v, const std::string& key) {
    return list<uint16_t>(v, key, [&](const toml::value& e) -> std::optional<uint16_t> {
      if (e.is_string()) {
        error(e, "'" + key + "' must be an integer such as 0x8086, not a string");
        return std::nullopt;
      }
      auto i = integer(e, key, 0, 0xffff);
      if (!i) return std::nullopt;
      return static_cast<uint16_t>(*i);
    });
  }

  std::vector<core::DeviceKind> kinds(const toml::value& v, const std::string& key) {
    return list<core::DeviceKind>(v, key,
                                  [&](const toml::value& e) { return enumValue(e, key, core::kDeviceKindNames); });
  }

  std::vector<core::ClassPattern> classes(const toml::value& v, const std::string& key) {
    return list<core::ClassPattern>(v, key, [&](const toml::value& e) -> std::optional<core::ClassPattern> {
      auto s = string(e, key);
      if (!s) return std::nullopt;
      if (auto c = core::parseClassPattern(*s)) return c;
      error(e, "'class' is \"" + *s + R"("; expected 2, 4 or 6 hex digits such as "02", "0108", "010802")");
      return std::nullopt;
    });
  }

  std::optional<core::IntRange> groupSize(const toml::value& v, const std::string& key) {
    if (v.is_integer()) {
      if (auto i = integer(v, key, 1, 4096)) return core::IntRange{static_cast<int>(*i), static_cast<int>(*i)};
      return std::nullopt;
    }
    auto s = string(v, key);
    if (!s) return std::nullopt;
    if (auto r = core::parseIntRange(*s)) return r;
    error(v, "'group-size' is \"" + *s + R"("; expected a number, ">=2", ">1", "<=4", "<5" or "2..4")");
    return std::nullopt;
  }

  std::optional<core::DeviceMatch> parseDeviceMatch(const toml::value& t, const std::string& where) {
    if (!t.is_table()) {
      error(t, where + " must be a table");
      return std::nullopt;
    }
    core::DeviceMatch m;
    forEachKey(
        t, where,
        {"vendor", "device", "subsystem-vendor", "subsystem-device", "class", "kind", "driver", "name", "address",
         "removable", "thunderbolt", "untrusted", "in-use", "group-size", "shares-group", "shares-group-with"},
        [&](const std::string& k, const toml::value& v) {
          if (k == "vendor")
            m.vendor = ids(v, k);
          else if (k == "device")
            m.device = ids(v, k);
          else if (k == "subsystem-vendor")
            m.subsystemVendor = ids(v, k);
          else if (k == "subsystem-device")
            m.subsystemDevice = ids(v, k);
          else if (k == "class")
            m.classes = classes(v, k);
          else if (k == "kind")
            m.kinds = kinds(v, k);
          else if (k == "driver")
            m.drivers = globs(v, k);
          else if (k == "name")
            m.names = globs(v, k);
          else if (k == "address")
            m.addresses = globs(v, k);
          else if (k == "removable")
            m.removable = boolean(v, k);
          else if (k == "thunderbolt")
            m.thunderbolt = boolean(v, k);
          else if (k == "untrusted")
            m.untrusted = boolean(v, k);
          else if (k == "in-use")
            m.inUse = boolean(v, k);
          else if (k == "shares-group")
            m.sharesGroup = boolean(v, k);
          else if (k == "shares-group-with")
            m.sharesGroupWith = kinds(v, k);
          else if (k == "group-size")
            m.groupSize = groupSize(v, k);
        });
    return m;
  }

  std::vector<core::Vendor> vendors(const toml::value& v, const std::string& key) {
    return list<core::Vendor>(v, key, [&](const toml::value& e) {
      return enumValue<core::Vendor>(
          e, key, {"intel", "amd", "arm-smmu", "arm-smmu-v3", "virtio", "none"},
          [](std::string_view s) -> std::optional<core::Vendor> {
            for (auto x : {core::Vendor::Intel, core::Vendor::Amd, core::Vendor::ArmSmmu, core::Vendor::ArmSmmuV3,
                           core::Vendor::Virtio, core::Vendor::None}) {
              if (s == core::toString(x)) return x;
            }
            return std::nullopt;
          });
    });
  }

  std::vector<std::string> modes(const toml::value& v, const std::string& key) {
    return strings(v, key, [&](const toml::value& e, const std::string& s) -> std::optional<std::string> {
      static const std::vector<std::string_view> names = {"off", "identity", "DMA", "DMA-FQ"};
      if (std::find(names.begin(), names.end(), s) != names.end()) return s;
      error(e, "'mode' is \"" + s + "\"; expected one of: " + joinNames(names));
      return std::nullopt;
    });
  }

  void kernelRange(const toml::value& v, const std::string& key, core::HostMatch& m) {
    auto s = string(v, key);
    if (!s) return;
    auto set = core::VersionSet::parse(*s);
    if (set) {
      m.kernel = std::move(set).value();
      m.kernelText = *s;
      return;
    }
    // The set's message names a column inside the string; point there.
    SourceLoc at = loc(v);
    std::string msg = set.error().message;
    if (msg.starts_with("column ")) {
      at.column += std::atoi(msg.c_str() + 7);
      if (auto colon = msg.find(": "); colon != std::string::npos) msg.erase(0, colon + 2);
    }
    errorAt(at, "'kernel' is not a version range: " + msg);
  }

  std::vector<std::string> cmdlineEntries(const toml::value& v, const std::string& key) {
    return strings(v, key, [&](const toml::value& e, const std::string& s) -> std::optional<std::string> {
      if (core::words(s).size() != 1 || s.find('"') != std::string::npos) {
        error(e, "'" + key + R"(' entries are single parameters such as "iommu.strict=1", not ")" + s + "\"");
        return std::nullopt;
      }
      return s;
    });
  }

  std::vector<std::string> findingIds(const toml::value& v, const std::string& key) {
    return strings(v, key, [&](const toml::value& e, const std::string& s) -> std::optional<std::string> {
      const auto& known = core::knownFindingIds();
      if (std::find(known.begin(), known.end(), s) != known.end()) return s;
      error(e, "'finding' is \"" + s + "\", which iommud does not know; expected one of: " + joinNames(known));
      return std::nullopt;
    });
  }

  core::HostMatch parseHostMatch(const toml::value& t) {
    core::HostMatch m;
    if (!t.is_table()) {
      error(t, "[rule.host] must be a table");
      return m;
    }
    forEachKey(t, "[rule.host]",
               {"iommu", "mode", "caching-mode", "rwbf", "np-cache", "kernel", "cmdline", "cmdline-absent", "finding"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "iommu")
                   m.iommu = vendors(v, k);
                 else if (k == "mode")
                   m.mode = modes(v, k);
                 else if (k == "caching-mode")
                   m.cachingMode = boolean(v, k);
                 else if (k == "rwbf")
                   m.rwbf = boolean(v, k);
                 else if (k == "np-cache")
                   m.npCache = boolean(v, k);
                 else if (k == "kernel")
                   kernelRange(v, k, m);
                 else if (k == "cmdline")
                   m.cmdline = cmdlineEntries(v, k);
                 else if (k == "cmdline-absent")
                   m.cmdlineAbsent = cmdlineEntries(v, k);
                 else if (k == "finding")
                   m.findings = findingIds(v, k);
               });
    return m;
  }

  // [rule.rings] and [rule.channels]: counts or "max", booleans, and tcp-data-split's names.
  void parseEthtool(const toml::value& t, const std::string& where, const std::vector<core::EthtoolKey>& keys,
                    std::map<std::string, core::Amount>& out) {
    if (!t.is_table()) {
      error(t, where + " must be a table");
      return;
    }
    std::vector<std::string_view> names;
    names.reserve(keys.size());
    for (const auto& k : keys) names.push_back(k.name);
    forEachKey(t, where, names, [&](const std::string& k, const toml::value& v) {
      const auto* key = core::findEthtoolKey(keys, k);
      using T = core::EthtoolKey::Type;
      switch (key->type) {
        case T::Bool:
          if (auto b = boolean(v, k)) out[k] = core::Amount{*b ? 1U : 0U};
          return;
        case T::TcpDataSplit:
          if (auto a = tcpDataSplit(v, k)) out[k] = *a;
          return;
        case T::CountOrMax:
          if (v.is_string()) {
            if (auto a = maxAmount(v, k)) out[k] = *a;
            return;
          }
          [[fallthrough]];
        case T::Count:
          if (auto i = integer(v, k, 0, UINT32_MAX)) out[k] = core::Amount{static_cast<uint32_t>(*i)};
          return;
      }
    });
  }

  // tcp-data-split's names, as the kernel numbers them.
  std::optional<core::Amount> tcpDataSplit(const toml::value& v, const std::string& k) {
    auto s = string(v, k);
    if (!s) return std::nullopt;
    if (*s == "auto") return core::Amount{0U};
    if (*s == "disabled") return core::Amount{1U};
    if (*s == "enabled") return core::Amount{2U};
    error(v, "'" + k + "' is \"" + *s + "\"; expected one of: auto, disabled, enabled");
    return std::nullopt;
  }

  // "max": the most the device allows (an Amount without a value).
  std::optional<core::Amount> maxAmount(const toml::value& v, const std::string& k) {
    if (v.as_string().str == "max") return core::Amount{};
    error(v, "'" + k + "' is \"" + v.as_string().str + R"("; expected a number or "max")");
    return std::nullopt;
  }

  void parseCoalesce(const toml::value& t, std::map<std::string, uint32_t>& out) {
    std::map<std::string, core::Amount> amounts;
    parseEthtool(t, "[rule.coalesce]", core::coalesceKeys(), amounts);
    for (const auto& [k, a] : amounts) out[k] = a.value.value_or(0);
  }

  // Module and parameter names as the kernel spells them; modules may also use '-'.
  static bool identifier(const std::string& s, bool dash) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [dash](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
             (dash && c == '-');
    });
  }

  // A module's or parameter's name, or "" after saying what it should have been.
  std::string identifierValue(const toml::value& v, const std::string& key, bool dash, const std::string& expected) {
    auto s = string(v, key);
    if (!s) return {};
    if (identifier(*s, dash)) return *s;
    error(v, "'" + key + "' is \"" + *s + "\"; expected " + expected);
    return {};
  }

  // A parameter's value as written to sysfs or modprobe.d: booleans as Y/N, integers in decimal.
  std::optional<std::string> paramValue(const toml::value& v) {
    if (v.is_boolean()) return v.as_boolean() ? "Y" : "N";
    if (v.is_integer()) return std::to_string(v.as_integer());
    if (!v.is_string()) {
      error(v, "'value' must be a string, an integer or a boolean, not " + typeName(v));
      return std::nullopt;
    }
    // The value ends up on a modprobe.d line: no spaces, comments or line breaks.
    const auto& s = v.as_string().str;
    if (s.empty() || std::any_of(s.begin(), s.end(), [](char c) {
          return c <= ' ' || c == '#' || c == '"' || c == '\'' || c == '\\' || c == 127;
        })) {
      error(v, "'value' must be one word of printable characters without quotes, '#' or '\\'");
      return std::nullopt;
    }
    return s;
  }

  std::optional<core::ParamSetting> parseParam(const toml::value& t) {
    if (!t.is_table()) {
      error(t, "each [[rule.param]] must be a table");
      return std::nullopt;
    }
    core::ParamSetting p;
    p.where = loc(t);
    bool haveName = false;
    bool haveValue = false;
    std::optional<core::ParamSetting::TakesEffect> takesEffect;
    forEachKey(t, "[[rule.param]]", {"module", "name", "value", "at", "takes-effect", "optional"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "module") {
                   p.module = identifierValue(v, k, true, "a module name (letters, digits, _ and -)");
                 } else if (k == "name") {
                   haveName = v.is_string();
                   p.name = identifierValue(v, k, false, "a parameter name (letters, digits and _)");
                 } else if (k == "value") {
                   haveValue = true;
                   p.value = paramValue(v).value_or("");
                 } else if (k == "at") {
                   p.at = enumValue(v, k, core::ParamSetting::kAtNames).value_or(p.at);
                 } else if (k == "takes-effect") {
                   takesEffect = enumValue(v, k, core::ParamSetting::kTakesEffectNames);
                 } else if (k == "optional") {
                   p.optional = boolean(v, k).value_or(false);
                 }
               });
    if (!haveName) error(t, "[[rule.param]] needs 'name', the parameter to set");
    if (!haveValue) error(t, "[[rule.param]] needs 'value'");
    if (takesEffect) {
      if (p.at == core::ParamSetting::At::Load) {
        warning(t, "'takes-effect' is meaningless for a load-time parameter: it takes effect when the module loads");
      }
      p.takesEffect = *takesEffect;
    }
    if (!haveName || !haveValue || p.name.empty() || p.value.empty()) return std::nullopt;
    return p;
  }

  std::optional<core::RuleMode> ruleMode(const toml::value& v) { return enumValue(v, "mode", core::kRuleModeNames); }

  std::optional<core::When> when(const toml::value& v) { return enumValue(v, "when", core::kWhenNames); }

  std::vector<core::Acceptance> accepts(const toml::value& v) {
    if (!v.is_array()) {
      error(v, "'accept' must be an array such as [\"no-isolation\"], not " + typeName(v));
      return {};
    }
    std::vector<core::Acceptance> out;
    for (const auto& e : v.as_array()) {
      if (auto a = enumValue(e, "accept", core::kAcceptanceNames)) {
        out.push_back(*a);
      }
    }
    return out;
  }

  // The name that overrides and plans refer to the rule by.
  std::string ruleName(const toml::value& v) {
    auto name = string(v, "name");
    if (!name) return {};
    bool valid = !name->empty() && name->size() <= 64 && std::isalnum(static_cast<unsigned char>(name->front())) &&
                 std::all_of(name->begin(), name->end(), [](char c) {
                   return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
                 });
    if (!valid) {
      error(v, "'name' is \"" + *name +
                   "\"; expected lower-case letters, digits, '-', '_' and '.', starting with a letter "
                   "or digit, at most 64 characters");
    }
    return *name;
  }

  std::string description(const toml::value& v) {
    auto text = string(v, "description");
    if (!text) return {};
    if (core::trim(*text).empty()) error(v, "'description' must say what the rule is for");
    return *text;
  }

  // [rule.unless] is one exclusion; [[rule.unless]] several, any of which excludes.
  void parseUnless(const toml::value& v, std::vector<core::DeviceMatch>& out) {
    if (v.is_array()) {
      for (const auto& u : v.as_array()) {
        if (auto m = parseDeviceMatch(u, "[[rule.unless]]")) out.push_back(std::move(*m));
      }
    } else if (auto m = parseDeviceMatch(v, "[rule.unless]")) {
      out.push_back(std::move(*m));
    }
  }

  void parseParams(const toml::value& v, std::vector<core::ParamSetting>& out) {
    if (!v.is_array()) {
      error(v, "'param' must be an array of tables, written [[rule.param]]");
      return;
    }
    for (const auto& p : v.as_array()) {
      if (auto ps = parseParam(p)) out.push_back(std::move(*ps));
    }
  }

  // A rule with no error so far must still act, and accepting risks only makes sense below DMA.
  void checkRuleActs(const toml::value& t, const core::Rule& r, size_t errorsBefore) {
    bool acts = r.domain || !r.rings.empty() || !r.channels.empty() || !r.coalesce.empty() || !r.params.empty();
    if (!acts && errorCount() == errorsBefore) {
      error(t,
            "rule '" + r.name +
                "' does nothing: give it 'domain', [rule.rings], [rule.channels], [rule.coalesce] or [[rule.param]]");
    }
    if (r.domain == core::DomainRequest::Dma) {
      for (auto a : r.accepts) {
        warning(t, "rule '" + r.name + "' accepts " + std::string(core::toString(a)) +
                       " but asks for DMA, which gives up nothing");
      }
    }
  }

  std::optional<core::Rule> parseRule(const toml::value& t) {
    core::Rule r;
    r.where = loc(t);
    size_t errorsBefore = errorCount();
    bool haveName = false;
    bool haveDescription = false;
    forEachKey(t, "[[rule]]",
               {"name", "description", "mode", "when", "accept", "domain", "match", "unless", "host", "rings",
                "channels", "coalesce", "param"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "name") {
                   haveName = v.is_string();
                   r.name = ruleName(v);
                 } else if (k == "description") {
                   haveDescription = v.is_string();
                   r.description = description(v);
                 } else if (k == "mode") {
                   r.mode = ruleMode(v).value_or(r.mode);
                 } else if (k == "when") {
                   r.when = when(v);
                 } else if (k == "accept") {
                   r.accepts = accepts(v);
                 } else if (k == "domain") {
                   r.domain = enumValue(v, k, core::kDomainRequestNames);
                   r.domainWhere = loc(v);
                 } else if (k == "match") {
                   if (auto m = parseDeviceMatch(v, "[rule.match]")) r.device = std::move(*m);
                 } else if (k == "unless") {
                   parseUnless(v, r.unless);
                 } else if (k == "host") {
                   r.host = parseHostMatch(v);
                 } else if (k == "rings") {
                   parseEthtool(v, "[rule.rings]", core::ringKeys(), r.rings);
                 } else if (k == "channels") {
                   parseEthtool(v, "[rule.channels]", core::channelKeys(), r.channels);
                 } else if (k == "coalesce") {
                   parseCoalesce(v, r.coalesce);
                 } else if (k == "param") {
                   parseParams(v, r.params);
                 }
               });
    if (!haveName) error(t, "[[rule]] needs 'name'");
    if (!haveDescription) error(t, "[[rule]] needs 'description': say what the rule is for");
    checkRuleActs(t, r, errorsBefore);
    if (errorCount() != errorsBefore) return std::nullopt;
    return r;
  }

  std::optional<Override> parseOverride(const toml::value& t) {
    Override o;
    o.where = loc(t);
    size_t errorsBefore = errorCount();
    forEachKey(t, "[[override]]", {"rule", "mode", "when", "accept", "enabled"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "rule") o.rule = string(v, k).value_or("");
                 if (k == "mode") o.mode = ruleMode(v);
                 if (k == "when") o.when = when(v);
                 if (k == "accept") o.accepts = accepts(v);
                 if (k == "enabled") o.enabled = boolean(v, k);
               });
    if (o.rule.empty()) error(t, "[[override]] needs 'rule', the name of the rule it changes");
    if (!o.mode && !o.when && !o.accepts && !o.enabled) {
      warning(t, "[[override]] changes nothing: give it 'mode', 'when', 'accept' or 'enabled'");
    }
    if (errorCount() != errorsBefore) return std::nullopt;
    return o;
  }
};

}  // namespace

ParsedFile parsePolicyText(std::string_view text, const std::string& fileName) {
  ParsedFile parsed;
  detail::parseWith<FileParser>(text, fileName, kPolicyText, parsed, parsed.diagnostics);
  return parsed;
}

Loaded combine(std::vector<core::PolicyFile> files, std::vector<ParsedFile> parsed) {
  Loaded out;
  out.policies.files = std::move(files);
  std::map<std::string, size_t> byName;
  for (auto& p : parsed) {
    for (auto& d : p.diagnostics) out.diagnostics.push_back(std::move(d));
    for (auto& r : p.rules) {
      if (auto it = byName.find(r.name); it != byName.end()) {
        out.diagnostics.push_back(Diagnostic{r.where, Severity::Error,
                                             "rule '" + r.name + "' is already defined at " +
                                                 out.policies.rules[it->second].where.str() +
                                                 "; rule names are unique (use [[override]] to change a rule)"});
        continue;
      }
      byName.emplace(r.name, out.policies.rules.size());
      out.policies.rules.push_back(std::move(r));
    }
    // Overrides see the rules of their own and of earlier files only.
    for (const auto& o : p.overrides) {
      auto it = byName.find(o.rule);
      if (it == byName.end()) {
        out.diagnostics.push_back(
            Diagnostic{o.where, Severity::Error,
                       "[[override]] of rule '" + o.rule + "', which no file read before this one defines"});
        continue;
      }
      auto& r = out.policies.rules[it->second];
      if (o.mode) r.mode = *o.mode;
      if (o.when) r.when = *o.when;
      if (o.accepts) r.accepts = *o.accepts;
      if (o.enabled) r.enabled = *o.enabled;
      r.overriddenBy.push_back(o.where.str());
    }
  }
  return out;
}

std::vector<std::string> hostPolicyDirs() {
  return {"/etc/iommud/policies.d", "/run/iommud/policies.d"};
}

std::string installedPolicyDir() {
  return IOMMUD_SHIPPED_POLICY_DIR;
}

std::string shippedPolicyDir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = exe.parent_path().parent_path() / "share/iommud/policies";
    if (std::filesystem::is_directory(beside, ec)) {
      auto real = std::filesystem::canonical(beside, ec);
      if (!ec) return real.string();
    }
  }
  return installedPolicyDir();
}

std::vector<std::string> defaultPolicyDirs() {
  auto dirs = hostPolicyDirs();
  dirs.push_back(shippedPolicyDir());
  return dirs;
}

}  // namespace iommud::config
