#include "config/daemon_config.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

#include "config/config_file.hpp"
#include "config/toml_support.hpp"

namespace iommud::config {

std::string_view toString(LogLevel level) {
  return core::nameOf(kLogLevelNames, level);
}

bool LoadedConfig::ok() const {
  return std::none_of(diagnostics.begin(), diagnostics.end(),
                      [](const Diagnostic& d) { return d.severity == Diagnostic::Severity::Error; });
}

namespace {

using detail::typeName;

bool hasControlCharacters(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20U; });
}

// The file is a handful of lines; nothing in it nests deeper than an array.
constexpr detail::TextRules kConfigText{kMaxConfigBytes, 8, kMaxKeysPerLine, "configuration files",
                                        "the configuration never needs that"};

// Validates iommud.conf. A table ([prometheus], [nfd]) is one more top-level key whose handler
// runs forEachKey over the table with that table's own keys.
class ConfigParser : public detail::Checker {
 public:
  using Checker::Checker;

  void parseTop(const toml::value& top, DaemonConfig& config) {
    forEachKey(
        top, "the top level",
        {"log-level", "debounce-ms", "advise-only", "revert-on-stop", "policy-dirs", "prometheus", "nfd", "measure"},
        [&](const std::string& k, const toml::value& v) {
          if (k == "log-level") config.logLevel = logLevel(v).value_or(config.logLevel);
          if (k == "debounce-ms") {
            if (auto ms = integer(v, k, 0, kMaxDebounceMs)) config.debounce = std::chrono::milliseconds(*ms);
          }
          if (k == "advise-only") config.adviseOnly = boolean(v, k).value_or(config.adviseOnly);
          if (k == "revert-on-stop") config.revertOnStop = boolean(v, k).value_or(config.revertOnStop);
          if (k == "policy-dirs") config.policyDirs = policyDirs(v);
          if (k == "prometheus") prometheus(v, config);
          if (k == "nfd") nfd(v, config);
          if (k == "measure") measure(v, config);
        });
  }

 private:
  void prometheus(const toml::value& table, DaemonConfig& config) {
    if (!isTable(table, "prometheus")) return;
    forEachKey(table, "[prometheus]", {"enabled", "directory"}, [&](const std::string& k, const toml::value& v) {
      if (k == "enabled") config.prometheus = boolean(v, k).value_or(config.prometheus);
      if (k == "directory") config.prometheusDirectory = path(v, k, false).value_or(config.prometheusDirectory);
    });
  }

  void nfd(const toml::value& table, DaemonConfig& config) {
    if (!isTable(table, "nfd")) return;
    forEachKey(table, "[nfd]", {"enabled", "file"}, [&](const std::string& k, const toml::value& v) {
      if (k == "enabled") config.nfd = boolean(v, k).value_or(config.nfd);
      if (k == "file") config.nfdFile = path(v, k, true).value_or(config.nfdFile);
    });
  }

  void measure(const toml::value& table, DaemonConfig& config) {
    if (!isTable(table, "measure")) return;
    forEachKey(table, "[measure]", {"enabled", "interval", "effect-window"},
               [&](const std::string& k, const toml::value& v) {
                 if (k == "enabled") config.measure = boolean(v, k).value_or(config.measure);
                 if (k == "interval") {
                   if (auto s = integer(v, k, 1, kMaxMeasureIntervalS))
                     config.measureInterval = std::chrono::seconds(*s);
                 }
                 if (k == "effect-window") {
                   if (auto s = integer(v, k, 0, kMaxEffectWindowS)) config.effectWindow = std::chrono::seconds(*s);
                 }
               });
  }

  bool isTable(const toml::value& v, const std::string& name) {
    if (v.is_table()) return true;
    error(v, "'" + name + "' must be a table ([" + name + "] with its keys below), not " + typeName(v));
    return false;
  }

  // An absolute path; a file's name must not start with '.': node-feature-discovery skips dot
  // files (that is how writers hide their temporary files from it).
  std::optional<std::string> path(const toml::value& v, const std::string& key, bool file) {
    auto s = string(v, key);
    if (!s) return std::nullopt;
    if (s->empty() || s->front() != '/') {
      error(v, "'" + key + "' is \"" + *s + "\"; give an absolute path");
    } else if (hasControlCharacters(*s)) {
      error(v, "'" + key + "' must not hold control characters");
    } else if (file && (s->back() == '/' || s->substr(s->rfind('/') + 1).front() == '.')) {
      error(v, "'" + key + "' is \"" + *s + "\"; name a file whose name does not start with '.'");
    } else {
      return s;
    }
    return std::nullopt;
  }

  std::optional<LogLevel> logLevel(const toml::value& v) { return enumValue(v, "log-level", kLogLevelNames); }

  std::vector<std::string> policyDirs(const toml::value& v) {
    const std::string key = "policy-dirs";
    if (!v.is_array()) {
      error(v,
            "'" + key + R"(' must be an array of directories such as ["/etc/iommud/policies.d"], not )" + typeName(v));
      return {};
    }
    const auto& dirs = v.as_array();
    if (dirs.empty()) {
      error(v, "'" + key + "' is an empty array: iommud would read no policy; leave it out for the default layers");
      return {};
    }
    if (dirs.size() > kMaxPolicyDirs) {
      error(v, "'" + key + "' names " + std::to_string(dirs.size()) + " directories; at most " +
                   std::to_string(kMaxPolicyDirs));
      return {};
    }
    std::vector<std::string> out;
    for (const auto& e : dirs) {
      auto s = string(e, key);
      if (!s) continue;
      if (s->empty()) {
        error(e, "'" + key + "' entries must not be empty");
      } else if (s->front() != '/') {
        error(e, "'" + key + "' entry \"" + *s + "\" is relative; give an absolute path");
      } else if (hasControlCharacters(*s)) {
        error(e, "'" + key + "' entries must not hold control characters");
      } else if (std::find(out.begin(), out.end(), *s) != out.end()) {
        warning(e, "'" + key + "' names \"" + *s + "\" twice; the first counts");
      } else {
        out.push_back(std::move(*s));
      }
    }
    return out;
  }
};

}  // namespace

LoadedConfig parseDaemonConfig(std::string_view text, const std::string& fileName) {
  LoadedConfig loaded;
  detail::parseWith<ConfigParser>(text, fileName, kConfigText, loaded.config, loaded.diagnostics);
  return loaded;
}

LoadedConfig loadDaemonConfig(const std::string& path, std::optional<unsigned> requireOwner) {
  std::optional<detail::WriterCheck> check;
  if (requireOwner) check.emplace(*requireOwner);
  auto read = detail::readConfigFile(path, kMaxConfigBytes, check ? &*check : nullptr, "the configuration", openOnHost);
  LoadedConfig loaded;
  if (read.unreadable) {
    int err = read.unreadable->code;
    if (err == ENOENT) return loaded;  // no file: every default
    const char* name = ::strerrorname_np(err);
    loaded.diagnostics.push_back(Diagnostic{core::SourceLoc{path, 0, 0}, Diagnostic::Severity::Error,
                                            "cannot read the configuration: " + read.unreadable->message + " (" +
                                                (name != nullptr ? name : "errno " + std::to_string(err)) + ")"});
    return loaded;
  }
  if (read.text) loaded = parseDaemonConfig(*read.text, path);
  loaded.diagnostics.insert(loaded.diagnostics.begin(), read.refusals.begin(), read.refusals.end());
  return loaded;
}

}  // namespace iommud::config
