#include "config/daemon_config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "unit/temp_dir.hpp"

namespace daemon_config_test {

using namespace iommud;
using config::DaemonConfig;
using config::Diagnostic;
using config::LogLevel;
namespace fs = std::filesystem;

std::vector<std::string> lines(const config::LoadedConfig& loaded) {
  std::vector<std::string> out;
  for (const auto& d : loaded.diagnostics) out.push_back(d.str());
  return out;
}

// The diagnostics of a text read as "iommud.conf".
std::vector<std::string> report(const std::string& text) {
  return lines(config::parseDaemonConfig(text, "iommud.conf"));
}

const std::string kAllowed =
    "expected one of: log-level, debounce-ms, advise-only, revert-on-stop, policy-dirs, prometheus, nfd, measure";

void expectDefaults(const DaemonConfig& c) {
  EXPECT_EQ(c.logLevel, LogLevel::Info);
  EXPECT_EQ(c.debounce, std::chrono::milliseconds(200));
  EXPECT_FALSE(c.adviseOnly);
  EXPECT_FALSE(c.revertOnStop);
  EXPECT_TRUE(c.policyDirs.empty());
  EXPECT_FALSE(c.prometheus);
  EXPECT_EQ(c.prometheusDirectory, "/var/lib/prometheus/node-exporter");
  EXPECT_FALSE(c.nfd);
  EXPECT_EQ(c.nfdFile, "/etc/kubernetes/node-feature-discovery/features.d/iommud");
  EXPECT_FALSE(c.measure);
  EXPECT_EQ(c.measureInterval, std::chrono::seconds(15));
  EXPECT_EQ(c.effectWindow, std::chrono::seconds(0));
}

using iommud::testing::TempDir;

TEST(DaemonConfig, EmptyTextGivesTheDefaults) {
  auto loaded = config::parseDaemonConfig("", "iommud.conf");
  EXPECT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded.diagnostics.empty());
  expectDefaults(loaded.config);
}

TEST(DaemonConfig, AMissingFileGivesTheDefaultsWithoutADiagnostic) {
  TempDir dir;
  auto loaded = config::loadDaemonConfig((dir.path() / "iommud.conf").string());
  EXPECT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded.diagnostics.empty());
  expectDefaults(loaded.config);
}

TEST(DaemonConfig, ReadsEveryKey) {
  auto loaded = config::parseDaemonConfig(R"(log-level = "debug"
debounce-ms = 750
advise-only = true
revert-on-stop = true
policy-dirs = ["/srv/iommud/policies", "/etc/iommud/policies.d"]
)",
                                          "iommud.conf");
  ASSERT_TRUE(loaded.ok()) << ::testing::PrintToString(lines(loaded));
  EXPECT_TRUE(loaded.diagnostics.empty());
  EXPECT_EQ(loaded.config.logLevel, LogLevel::Debug);
  EXPECT_EQ(loaded.config.debounce, std::chrono::milliseconds(750));
  EXPECT_TRUE(loaded.config.adviseOnly);
  EXPECT_TRUE(loaded.config.revertOnStop);
  EXPECT_EQ(loaded.config.policyDirs, (std::vector<std::string>{"/srv/iommud/policies", "/etc/iommud/policies.d"}));
}

TEST(DaemonConfig, ReadsEveryLogLevelAndItsName) {
  for (auto level : {LogLevel::Error, LogLevel::Warning, LogLevel::Notice, LogLevel::Info, LogLevel::Debug}) {
    auto name = std::string(config::toString(level));
    auto loaded = config::parseDaemonConfig("log-level = \"" + name + "\"\n", "iommud.conf");
    ASSERT_TRUE(loaded.ok()) << name;
    EXPECT_EQ(loaded.config.logLevel, level) << name;
  }
}

TEST(DaemonConfig, AcceptsTheBoundsOfDebounce) {
  EXPECT_EQ(config::parseDaemonConfig("debounce-ms = 0", "c").config.debounce, std::chrono::milliseconds(0));
  EXPECT_EQ(config::parseDaemonConfig("debounce-ms = 10000", "c").config.debounce, std::chrono::milliseconds(10000));
}

// Every error of the file at once, each at the value (or key) it is about, in file order.
TEST(DaemonConfig, ReportsEachKindOfErrorAtItsLineAndColumn) {
  auto loaded = config::parseDaemonConfig(R"(log-level = "verbose"
debounce-ms = 10001
advise-only = "yes"
revert-on-stop = 1
policy-dirs = ["/etc/iommud/policies.d", "policies", "", 7]
)",
                                          "iommud.conf");
  EXPECT_FALSE(loaded.ok());
  EXPECT_EQ(
      lines(loaded),
      (std::vector<std::string>{
          R"(iommud.conf:1:13: error: 'log-level' is "verbose"; expected one of: error, warning, notice, info, debug)",
          "iommud.conf:2:15: error: 'debounce-ms' is 10001, out of range 0..10000",
          "iommud.conf:3:15: error: 'advise-only' must be true or false, not a string",
          "iommud.conf:4:18: error: 'revert-on-stop' must be true or false, not an integer",
          R"(iommud.conf:5:42: error: 'policy-dirs' entry "policies" is relative; give an absolute path)",
          "iommud.conf:5:54: error: 'policy-dirs' entries must not be empty",
          "iommud.conf:5:58: error: 'policy-dirs' must be a string, not an integer",
      }));
}

TEST(DaemonConfig, ReportsWrongTypesOfEachKey) {
  EXPECT_EQ(
      report("log-level = 3\ndebounce-ms = 0.5\nadvise-only = 0\npolicy-dirs = \"/etc/iommud/policies.d\"\n"),
      (std::vector<std::string>{
          "iommud.conf:1:13: error: 'log-level' must be a string, not an integer",
          "iommud.conf:2:15: error: 'debounce-ms' must be an integer, not a float",
          "iommud.conf:3:15: error: 'advise-only' must be true or false, not an integer",
          R"(iommud.conf:4:15: error: 'policy-dirs' must be an array of directories such as ["/etc/iommud/policies.d"], not a string)",
      }));
}

TEST(DaemonConfig, RefusesANegativeDebounceAndAnEmptyOrLongPolicyDirs) {
  std::string many = "policy-dirs = [";
  for (int i = 0; i < 17; ++i) many += "\"/p" + std::to_string(i) + "\", ";
  many += "]\n";
  EXPECT_EQ(report("debounce-ms = -1\n" + many),
            (std::vector<std::string>{
                "iommud.conf:1:15: error: 'debounce-ms' is -1, out of range 0..10000",
                "iommud.conf:2:15: error: 'policy-dirs' names 17 directories; at most 16",
            }));
  EXPECT_EQ(report("policy-dirs = []"),
            (std::vector<std::string>{"iommud.conf:1:15: error: 'policy-dirs' is an empty array: iommud would read no "
                                      "policy; leave it out for the default layers"}));
}

TEST(DaemonConfig, WarnsAboutADirectoryNamedTwiceAndKeepsTheFirst) {
  auto loaded = config::parseDaemonConfig(R"(policy-dirs = ["/a", "/b", "/a"])", "iommud.conf");
  EXPECT_TRUE(loaded.ok());
  EXPECT_EQ(
      lines(loaded),
      (std::vector<std::string>{R"(iommud.conf:1:28: warning: 'policy-dirs' names "/a" twice; the first counts)"}));
  EXPECT_EQ(loaded.config.policyDirs, (std::vector<std::string>{"/a", "/b"}));
}

TEST(DaemonConfig, AnUnknownKeyIsAnErrorThatNamesTheNearestKey) {
  EXPECT_FALSE(config::parseDaemonConfig("loglevel = \"debug\"", "iommud.conf").ok());
  EXPECT_EQ(report("log-level = \"info\"\n  loglevel = \"debug\"\n"),
            (std::vector<std::string>{"iommud.conf:2:3: error: unknown key 'loglevel' in the top level; did you mean "
                                      "'log-level'?"}));
}

TEST(DaemonConfig, AnUnknownTableIsAnError) {
  EXPECT_EQ(report("debounce-ms = 100\n\n[grafana]\nport = 9100\n"),
            (std::vector<std::string>{"iommud.conf:3:2: error: unknown key 'grafana' in the top level; " + kAllowed}));
}

TEST(DaemonConfig, ReadsTheFleetExportTables) {
  auto loaded = config::parseDaemonConfig(R"([prometheus]
enabled = true
directory = "/srv/textfiles"

[nfd]
enabled = true
file = "/run/nfd/features.d/iommud"
)",
                                          "iommud.conf");
  ASSERT_TRUE(loaded.ok()) << ::testing::PrintToString(lines(loaded));
  EXPECT_TRUE(loaded.diagnostics.empty());
  EXPECT_TRUE(loaded.config.prometheus);
  EXPECT_EQ(loaded.config.prometheusDirectory, "/srv/textfiles");
  EXPECT_TRUE(loaded.config.nfd);
  EXPECT_EQ(loaded.config.nfdFile, "/run/nfd/features.d/iommud");
}

TEST(DaemonConfig, ReadsTheMeasureTableAndItsBounds) {
  auto loaded = config::parseDaemonConfig("[measure]\nenabled = true\ninterval = 60\n", "iommud.conf");
  ASSERT_TRUE(loaded.ok()) << ::testing::PrintToString(lines(loaded));
  EXPECT_TRUE(loaded.config.measure);
  EXPECT_EQ(loaded.config.measureInterval, std::chrono::seconds(60));
  EXPECT_EQ(loaded.config.effectWindow, std::chrono::seconds(0));
  EXPECT_EQ(config::parseDaemonConfig("[measure]\neffect-window = 10\n", "c").config.effectWindow,
            std::chrono::seconds(10));
  EXPECT_EQ(report("[measure]\neffect-window = 601\n"),
            (std::vector<std::string>{"iommud.conf:2:17: error: 'effect-window' is 601, out of range 0..600"}));
  EXPECT_EQ(report("[measure]\ninterval = 0\n").size(), 1U);
  EXPECT_EQ(report("[measure]\ninterval = 3601\nwindow = 5\n"),
            (std::vector<std::string>{"iommud.conf:2:12: error: 'interval' is 3601, out of range 1..3600",
                                      "iommud.conf:3:1: error: unknown key 'window' in [measure]; expected one of: "
                                      "enabled, interval, effect-window"}));
}

TEST(DaemonConfig, ReportsEveryErrorOfTheFleetExportTables) {
  EXPECT_EQ(
      report(R"(prometheus = true
[nfd]
enabled = "yes"
file = "/etc/kubernetes/node-feature-discovery/features.d/.iommud"
port = 1
)"),
      (std::vector<std::string>{
          "iommud.conf:1:14: error: 'prometheus' must be a table ([prometheus] with its keys below), not a "
          "boolean",
          "iommud.conf:3:11: error: 'enabled' must be true or false, not a string",
          "iommud.conf:4:8: error: 'file' is \"/etc/kubernetes/node-feature-discovery/features.d/.iommud\"; name a "
          "file whose name does not start with '.'",
          "iommud.conf:5:1: error: unknown key 'port' in [nfd]; expected one of: enabled, file"}));
  EXPECT_EQ(report("[prometheus]\ndirectory = \"textfiles\"\n[nfd]\nfile = \"/etc/nfd/\"\n"),
            (std::vector<std::string>{
                "iommud.conf:2:13: error: 'directory' is \"textfiles\"; give an absolute path",
                "iommud.conf:4:8: error: 'file' is \"/etc/nfd/\"; name a file whose name does not start with '.'"}));
}

TEST(DaemonConfig, ASyntaxErrorIsOneLocatedLine) {
  EXPECT_EQ(report("log-level = \"info\"\ndebounce-ms =\n"),
            (std::vector<std::string>{"iommud.conf:2:14: error: no value after '='"}));
}

TEST(DaemonConfig, ADuplicateKeyIsAnError) {
  auto loaded = config::parseDaemonConfig("advise-only = true\nadvise-only = false\n", "iommud.conf");
  EXPECT_FALSE(loaded.ok());
  ASSERT_EQ(loaded.diagnostics.size(), 1U);
  EXPECT_EQ(loaded.diagnostics[0].where.line, 2);
}

TEST(DaemonConfig, ChecksTheTextBeforeToml11SeesIt) {
  EXPECT_EQ(report("log-level = \"\xff\"\n"),
            (std::vector<std::string>{
                "iommud.conf:1:14: error: not valid UTF-8 (byte 0xff); configuration files are UTF-8 text"}));
  EXPECT_EQ(report(std::string(config::kMaxConfigBytes + 1, '#')),
            (std::vector<std::string>{"iommud.conf: error: file is 65537 bytes; configuration files are "
                                      "at most 65536 bytes"}));
}

TEST(DaemonConfig, LoadsAFile) {
  TempDir dir;
  auto path = (dir.path() / "iommud.conf").string();
  std::ofstream(path) << "advise-only = true\nlog-level = 1\n";
  auto loaded = config::loadDaemonConfig(path);
  EXPECT_TRUE(loaded.config.adviseOnly);
  EXPECT_EQ(lines(loaded),
            (std::vector<std::string>{path + ":2:13: error: 'log-level' must be a string, not an integer"}));
}

TEST(DaemonConfig, AnUnreadableFileIsAnErrorNamingTheErrno) {
  TempDir dir;
  auto loaded = config::loadDaemonConfig(dir.path().string());
  EXPECT_FALSE(loaded.ok());
  EXPECT_EQ(lines(loaded), (std::vector<std::string>{
                               dir.path().string() + ": error: cannot read the configuration: Is a directory (EISDIR)",
                           }));
}

TEST(DaemonConfig, TheShippedFileParsesWithoutDiagnosticsToTheDefaults) {
  auto shipped = fs::path(IOMMUD_TEST_DATA) / ".." / ".." / "etc" / "iommud.conf";
  ASSERT_TRUE(fs::exists(shipped));
  auto loaded = config::loadDaemonConfig(shipped.string());
  EXPECT_TRUE(loaded.diagnostics.empty()) << ::testing::PrintToString(lines(loaded));
  expectDefaults(loaded.config);
}

// Uncommenting a line of the shipped file must give the default it names, so the comments
// cannot drift from the code.
TEST(DaemonConfig, EachCommentedKeyOfTheShippedFileIsItsDefault) {
  std::ifstream in(fs::path(IOMMUD_TEST_DATA) / ".." / ".." / "etc" / "iommud.conf");
  std::string line;
  std::string table;  // a commented "#[table]" line: the keys below are its
  int keys = 0;
  while (std::getline(in, line)) {
    if (line.size() < 2 || line[0] != '#' || line[1] == ' ') continue;
    if (line[1] == '[') {
      table = line.substr(1) + '\n';
      continue;
    }
    auto loaded = config::parseDaemonConfig(table + line.substr(1), "iommud.conf");
    ASSERT_TRUE(loaded.diagnostics.empty()) << line << ": " << ::testing::PrintToString(lines(loaded));
    ++keys;
    if (line.starts_with("#policy-dirs")) {
      EXPECT_EQ(loaded.config.policyDirs.size(), config::defaultPolicyDirs().size()) << line;
      EXPECT_EQ(loaded.config.policyDirs.front(), config::defaultPolicyDirs().front()) << line;
    } else {
      expectDefaults(loaded.config);
    }
  }
  EXPECT_EQ(keys, 12);
}

// iommud.conf under the rules of policy files (config_file.hpp's WriterCheck, shared): as root the
// file and its directory must be root's and not writable by group or others. The owner asked for
// is a parameter, so these run as any user: ours for the mode checks, another uid for the owner.

// A configuration file in a directory only we can write: refused for nothing.
struct StrictConf {
  TempDir dir;
  fs::path file = dir.path() / "iommud.conf";
  StrictConf() {
    std::ofstream(file) << "log-level = \"debug\"\n";
    fs::permissions(file, fs::perms(0644));
    fs::permissions(dir.path(), fs::perms(0755));
  }
  [[nodiscard]] config::LoadedConfig load(unsigned owner) const {
    return config::loadDaemonConfig(file.string(), owner);
  }
};

bool says(const config::LoadedConfig& loaded, const fs::path& where, const std::string& what) {
  return std::any_of(loaded.diagnostics.begin(), loaded.diagnostics.end(), [&](const Diagnostic& d) {
    return d.where.file == where.string() && d.severity == Diagnostic::Severity::Error &&
           d.message.find(what) != std::string::npos;
  });
}

TEST(DaemonConfig, AcceptsAFileOnlyItsOwnerCanWriteWhenStrict) {
  StrictConf c;
  auto loaded = c.load(::geteuid());
  EXPECT_TRUE(loaded.ok()) << ::testing::PrintToString(lines(loaded));
  EXPECT_EQ(loaded.config.logLevel, LogLevel::Debug);
}

TEST(DaemonConfig, RefusesAFileWritableByOthers) {
  StrictConf c;
  fs::permissions(c.file, fs::perms(0646));
  auto loaded = c.load(::geteuid());
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(says(loaded, c.file, "refusing the configuration writable by group or others (mode 0646)"))
      << ::testing::PrintToString(lines(loaded));
  EXPECT_EQ(loaded.config.logLevel, LogLevel::Info);  // not read
}

TEST(DaemonConfig, RefusesAFileWritableByGroup) {
  StrictConf c;
  fs::permissions(c.file, fs::perms(0664));
  auto loaded = c.load(::geteuid());
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(says(loaded, c.file, "chmod go-w " + c.file.string())) << ::testing::PrintToString(lines(loaded));
}

TEST(DaemonConfig, RefusesAFileOwnedBySomeoneElse) {
  StrictConf c;
  auto loaded = c.load(::geteuid() + 1);  // the file is ours, so not that user's
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(says(loaded, c.file, "refusing the configuration owned by uid " + std::to_string(::geteuid())))
      << ::testing::PrintToString(lines(loaded));
}

TEST(DaemonConfig, RefusesAFileInADirectoryOthersCanWrite) {
  StrictConf c;
  fs::permissions(c.dir.path(), fs::perms(0757));
  auto loaded = c.load(::geteuid());
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(says(loaded, c.dir.path(), "refusing the configuration's directory writable by group or others"))
      << ::testing::PrintToString(lines(loaded));
}

TEST(DaemonConfig, RefusesASymlinkToAFileInADirectoryOthersCanWrite) {
  StrictConf c;
  TempDir elsewhere;
  fs::permissions(elsewhere.path(), fs::perms(0777));
  auto target = elsewhere.path() / "real.conf";
  std::ofstream(target) << "log-level = \"debug\"\n";
  fs::permissions(target, fs::perms(0644));
  fs::remove(c.file);
  fs::create_symlink(target, c.file);
  auto loaded = c.load(::geteuid());
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(says(loaded, elsewhere.path(), "writable by group or others (mode 0777)"))
      << ::testing::PrintToString(lines(loaded));
}

TEST(DaemonConfig, RefusesASymlinkToAFileOwnedBySomeoneElseAndNamesTheTarget) {
  StrictConf c;
  TempDir elsewhere;
  auto target = elsewhere.path() / "real.conf";
  std::ofstream(target) << "log-level = \"debug\"\n";
  fs::remove(c.file);
  fs::create_symlink(target, c.file);
  auto loaded = c.load(::geteuid() + 1);
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(says(loaded, c.file, "a symlink to " + target.string() + ": refusing the configuration owned by uid"))
      << ::testing::PrintToString(lines(loaded));
}

}  // namespace daemon_config_test
