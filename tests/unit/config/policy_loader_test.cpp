#include "config/policy_loader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "config/line_index.hpp"
#include "unit/golden.hpp"

namespace policy_loader_test {

using namespace iommud;
using config::Diagnostic;
namespace fs = std::filesystem;

const fs::path kBad = fs::path(IOMMUD_TEST_DATA) / "policies" / "bad";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::string> lines(const std::vector<Diagnostic>& diags) {
  std::vector<std::string> out;
  for (const auto& d : diags) out.push_back(d.str());
  return out;
}

// A directory tree of policy layers in a temporary directory, removed on destruction.
class Layers {
 public:
  Layers() {
    std::string tmpl = (fs::temp_directory_path() / "iommud-policies-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    for (const char* d : {"etc", "run", "usr"}) fs::create_directories(root_ / d);
  }
  ~Layers() { fs::remove_all(root_); }
  Layers(const Layers&) = delete;
  Layers& operator=(const Layers&) = delete;

  fs::path write(const std::string& layer, const std::string& name, const std::string& text) {
    fs::path p = root_ / layer / name;
    std::ofstream(p) << text;
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
    return p;
  }
  [[nodiscard]] std::vector<std::string> dirs() const {
    return {(root_ / "etc").string(), (root_ / "run").string(), (root_ / "usr").string()};
  }
  [[nodiscard]] const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

std::string rule(const std::string& name, const std::string& extra = "") {
  return "[[rule]]\nname = \"" + name + "\"\ndescription = \"test\"\ndomain = \"DMA\"\n" + extra;
}

std::vector<std::string> ruleNames(const config::Loaded& l) {
  std::vector<std::string> out;
  for (const auto& r : l.policies.rules)
    out.push_back(r.name + "@" + fs::path(r.where.file).parent_path().filename().string());
  return out;
}

// Every file of tests/data/policies/bad, with exactly the diagnostics `iommuctl check` prints.
TEST(PolicyLoader, ReportsEachKindOfErrorWithFileLineAndColumn) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kBad)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 15U);
  std::string report;
  for (const auto& f : files) {
    // Through combine(), as the loader does: rule names and overrides are checked there.
    auto loaded = config::combine({}, {config::parsePolicyText(slurp(f), "bad/" + f.filename().string())});
    EXPECT_FALSE(loaded.ok()) << f << " loaded without an error";
    for (const auto& d : loaded.diagnostics) {
      // Every error points into the file, not just at it.
      EXPECT_GT(d.where.line, 0) << d.str();
      EXPECT_GT(d.where.column, 0) << d.str();
      report += d.str() + "\n";
    }
  }
  iommud::testing::expectGolden("golden/bad_policies.txt", report);
}

TEST(PolicyLoader, ReportsAllSemanticErrorsOfAFileNotOnlyTheFirst) {
  auto parsed = config::parsePolicyText(slurp(kBad / "many-errors.toml"), "many-errors.toml");
  EXPECT_GE(parsed.diagnostics.size(), 12U);
  EXPECT_TRUE(parsed.rules.empty());
}

TEST(PolicyLoader, RefusesAFileLargerThanTheLimitBeforeParsing) {
  std::string big = "# " + std::string(config::kMaxPolicyBytes, 'x') + "\n";
  auto parsed = config::parsePolicyText(big, "big.toml");
  ASSERT_EQ(parsed.diagnostics.size(), 1U);
  EXPECT_NE(parsed.diagnostics[0].message.find("at most"), std::string::npos);
}

TEST(PolicyLoader, AcceptsNestingUpToTheLimitAndIgnoresBracketsInStringsAndComments) {
  std::string nested = std::string(config::kMaxPolicyNesting, '[') + std::string(config::kMaxPolicyNesting, ']');
  auto parsed = config::parsePolicyText("x = " + nested + "\n", "ok.toml");
  // Not a valid policy (unknown key), but it got past the nesting check to the schema.
  ASSERT_EQ(parsed.diagnostics.size(), 1U);
  EXPECT_NE(parsed.diagnostics[0].message.find("unknown key 'x'"), std::string::npos);
  std::string brackets(100, '[');
  auto strings = config::parsePolicyText(
      rule("strings") + "# " + brackets + "\n[rule.match]\nname = \"" + brackets + "\"\ndriver = '" + brackets + "'\n",
      "strings.toml");
  EXPECT_TRUE(strings.diagnostics.empty()) << lines(strings.diagnostics)[0];
}

TEST(PolicyLoader, RefusesMoreKeysOnOneLineThanTheLimit) {
  // "x = [{a = 1}, ...]": the key x and one per inline table.
  auto line = [](int keys) {
    std::string s = "x = [";
    for (int i = 1; i < keys; ++i) s += "{a = 1}, ";
    return s + "]\n";
  };
  auto atLimit = config::parsePolicyText(line(config::kMaxKeysPerLine), "ok.toml");
  ASSERT_EQ(atLimit.diagnostics.size(), 1U);
  EXPECT_NE(atLimit.diagnostics[0].message.find("unknown key 'x'"), std::string::npos);
  // The same keys on two lines are no problem either.
  auto twoLines =
      config::parsePolicyText("# 1\n" + line(config::kMaxKeysPerLine) + "y = [{a = 1}, {a = 1}]\n", "ok.toml");
  EXPECT_EQ(twoLines.diagnostics.size(), 2U);
  auto over = config::parsePolicyText("# 1\n" + line(config::kMaxKeysPerLine + 1), "wide.toml");
  ASSERT_EQ(over.diagnostics.size(), 1U);
  // At the '=' of the key past the limit.
  EXPECT_EQ(over.diagnostics[0].str(), "wide.toml:2:" + std::to_string(6 + 9 * (config::kMaxKeysPerLine - 1) + 3) +
                                           ": error: more than 64 keys on one line (inline tables); policies never "
                                           "need that");
}

// toml11 3.x copies the whole line for each basic string it parses (a 256 KiB line of "ab" took 24 s):
// more than the limit on one line is refused where the first one past it opens; literal strings,
// and the same strings on lines of their own, are taken.
TEST(PolicyLoader, RefusesMoreBasicStringsOnOneLineThanTheLimit) {
  auto line = [](int strings, char quote) {
    std::string s = "x = [";
    for (int i = 0; i < strings; ++i) s += std::string(i ? ", " : "") + quote + "ab" + quote;
    return s + "]\n";
  };
  auto atLimit = config::parsePolicyText(line(config::kMaxBasicStringsPerLine, '"'), "ok.toml");
  ASSERT_EQ(atLimit.diagnostics.size(), 1U);
  EXPECT_NE(atLimit.diagnostics[0].message.find("unknown key 'x'"), std::string::npos);
  auto literal = config::parsePolicyText(line(config::kMaxBasicStringsPerLine * 4, '\''), "ok.toml");
  ASSERT_EQ(literal.diagnostics.size(), 1U);
  EXPECT_NE(literal.diagnostics[0].message.find("unknown key 'x'"), std::string::npos);
  auto over = config::parsePolicyText("# 1\n" + line(config::kMaxBasicStringsPerLine + 1, '"'), "wide.toml");
  ASSERT_EQ(over.diagnostics.size(), 1U);
  EXPECT_EQ(over.diagnostics[0].str(),
            "wide.toml:2:" + std::to_string(6 + 6 * config::kMaxBasicStringsPerLine) +
                ": error: more than 128 basic strings (\"...\") on one line: put an array's items on lines of their "
                "own, or write them as literal strings ('...'); policies never need that");
}

// Issue 28: a value is located by a search in an index of the lines, not by counting the lines
// before it, so the work grows as the file does. Counted, not timed.
TEST(PolicyLoader, LocatingValuesGrowsLinearlyWithTheFile) {
  auto work = [](const std::string& text) {
    size_t before = config::detail::LineIndex::work();
    auto parsed = config::parsePolicyText(text, "large.toml");
    EXPECT_FALSE(parsed.rules.empty() && parsed.diagnostics.empty());
    return config::detail::LineIndex::work() - before;
  };
  // Many rules, each located twice (the rule, its domain).
  auto rules = [](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += rule("r" + std::to_string(i)) + "\n";
    return s;
  };
  EXPECT_LE(work(rules(400)), work(rules(200)) * 21 / 10);
  // Unknown keys on long lines, each located on its line: the diagnostics stop at 100.
  auto unknown = [](int n) {
    std::string s = rule("r") + "[rule.match]\n";
    for (int i = 0; i < n; ++i) s += "k" + std::to_string(i) + " = \"" + std::string(200, 'x') + "\"\n";
    return s;
  };
  EXPECT_LE(work(unknown(200)), work(unknown(100)) * 21 / 10);
}

TEST(PolicyLoader, ConvertsAValidRuleCompletely) {
  auto parsed = config::parsePolicyText(R"(
[[rule]]
name = "tb-nic"
description = "everything at once"
mode = "advise"
when = "always"
accept = ["lazy-invalidation"]
domain = "DMA-FQ"
[rule.match]
vendor = [0x1d6a, 0x8086]
class = "0200"
kind = "nic"
driver = "atl*"
removable = true
group-size = ">=2"
shares-group-with = ["nvme", "nic"]
[[rule.unless]]
driver = "vfio-pci"
[[rule.unless]]
in-use = true
[rule.host]
iommu = ["intel", "amd"]
kernel = ">=6.10,<6.12.43 || >=6.13"
cmdline = ["iommu.strict=0", "intel_iommu"]
finding = "default-on"
[rule.rings]
rx = "max"
tx = 4096
tx-push = true
tcp-data-split = "enabled"
[rule.channels]
combined = "max"
[rule.coalesce]
rx-usecs = 64
adaptive-rx = false
[[rule.param]]
module = "atlantic"
name = "aq_itr"
value = 0
at = "load"
)",
                                        "p.toml");
  ASSERT_TRUE(parsed.diagnostics.empty()) << lines(parsed.diagnostics)[0];
  ASSERT_EQ(parsed.rules.size(), 1U);
  const auto& r = parsed.rules[0];
  EXPECT_EQ(r.where.line, 2);
  EXPECT_EQ(r.mode, core::RuleMode::Advise);
  EXPECT_EQ(r.when, core::When::Always);
  EXPECT_TRUE(r.accepted(core::Acceptance::LazyInvalidation));
  EXPECT_EQ(r.domain, core::DomainRequest::DmaFq);
  EXPECT_EQ(r.device.vendor, (std::vector<uint16_t>{0x1d6a, 0x8086}));
  EXPECT_TRUE(r.device.classes.at(0).matches(0x020000));
  EXPECT_FALSE(r.device.classes.at(0).matches(0x010802));
  EXPECT_TRUE(r.device.groupSize->contains(2));
  EXPECT_FALSE(r.device.groupSize->contains(1));
  EXPECT_EQ(r.unless.size(), 2U);
  EXPECT_TRUE(r.host.kernel->contains({6, 12, 42}));
  EXPECT_FALSE(r.host.kernel->contains({6, 12, 43}));
  EXPECT_TRUE(r.rings.at("rx").isMax());
  EXPECT_EQ(r.rings.at("tx").value, 4096U);
  EXPECT_EQ(r.rings.at("tx-push").value, 1U);
  EXPECT_EQ(r.rings.at("tcp-data-split").value, 2U);
  EXPECT_EQ(r.coalesce.at("adaptive-rx"), 0U);
  ASSERT_EQ(r.params.size(), 1U);
  EXPECT_EQ(r.params[0].value, "0");
  EXPECT_EQ(r.params[0].at, core::ParamSetting::At::Load);
}

TEST(PolicyLoader, WarnsAboutAnOverrideThatChangesNothing) {
  auto parsed = config::parsePolicyText(rule("a") + "\n[[override]]\nrule = \"a\"\n", "w.toml");
  ASSERT_EQ(parsed.diagnostics.size(), 1U);
  EXPECT_EQ(parsed.diagnostics[0].severity, Diagnostic::Severity::Warning);
  auto loaded = config::combine({}, {parsed});
  EXPECT_TRUE(loaded.ok());
}

// --- layers ---

TEST(PolicyLayers, AdminFileReplacesTheShippedFileOfTheSameName) {
  Layers l;
  l.write("usr", "50-x.toml", rule("shipped"));
  l.write("etc", "50-x.toml", rule("admin"));
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, {});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(ruleNames(loaded), (std::vector<std::string>{"admin@etc"}));
  ASSERT_EQ(loaded.policies.files.size(), 1U);
  EXPECT_EQ(loaded.policies.files[0].shadowed.size(), 1U);
}

TEST(PolicyLayers, RuntimeFileReplacesShippedButNotAdmin) {
  Layers l;
  l.write("usr", "50-x.toml", rule("shipped"));
  l.write("run", "50-x.toml", rule("runtime"));
  l.write("run", "60-y.toml", rule("runtime-y"));
  l.write("etc", "60-y.toml", rule("admin-y"));
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, {});
  EXPECT_EQ(ruleNames(loaded), (std::vector<std::string>{"runtime@run", "admin-y@etc"}));
}

TEST(PolicyLayers, ALinkToDevNullOrAnEmptyFileMasks) {
  Layers l;
  l.write("usr", "30-a.toml", rule("a"));
  l.write("usr", "40-b.toml", rule("b"));
  l.write("usr", "50-c.toml", rule("c"));
  fs::create_symlink("/dev/null", l.root() / "etc" / "30-a.toml");
  l.write("run", "40-b.toml", "");
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, {});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(ruleNames(loaded), (std::vector<std::string>{"c@usr"}));
  EXPECT_TRUE(loaded.policies.files[0].masked);
  EXPECT_TRUE(loaded.policies.files[1].masked);
}

TEST(PolicyLayers, FilesAreReadInLexicalOrderAcrossLayersAndOnlyTomlCounts) {
  Layers l;
  l.write("usr", "90-late.toml", rule("late"));
  l.write("etc", "10-early.toml", rule("early"));
  l.write("run", "50-mid.toml", rule("mid"));
  l.write("etc", "README", "not a policy");
  l.write("etc", "20-x.toml.disabled", rule("disabled"));
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, {});
  EXPECT_EQ(ruleNames(loaded), (std::vector<std::string>{"early@etc", "mid@run", "late@usr"}));
}

TEST(PolicyLayers, AMissingDirectoryIsNormal) {
  auto loaded = config::loadPolicyFiles({"/nonexistent/iommud"}, {}, {});
  EXPECT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded.policies.rules.empty());
}

TEST(PolicyLayers, ADropInOverrideTurnsShippedAdviceIntoApply) {
  Layers l;
  l.write("usr", "40-nvme.toml", rule("nvme-identity", "mode = \"advise\"\n"));
  l.write("etc", "90-local.toml",
          "[[override]]\nrule = \"nvme-identity\"\nmode = \"apply\"\naccept = [\"no-isolation\"]\n");
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, {});
  ASSERT_TRUE(loaded.ok());
  const auto& r = loaded.policies.rules.at(0);
  EXPECT_EQ(r.mode, core::RuleMode::Apply);
  EXPECT_TRUE(r.accepted(core::Acceptance::NoIsolation));
  ASSERT_EQ(r.overriddenBy.size(), 1U);
  EXPECT_NE(r.overriddenBy[0].find("90-local.toml:1:1"), std::string::npos);
}

TEST(PolicyLayers, AnOverrideCannotReachARuleOfALaterFile) {
  Layers l;
  l.write("etc", "10-override.toml", "[[override]]\nrule = \"later\"\nenabled = false\n");
  l.write("usr", "50-rules.toml", rule("later"));
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, {});
  EXPECT_FALSE(loaded.ok());
}

TEST(PolicyLayers, ADuplicateRuleNameAcrossFilesIsAnError) {
  Layers l;
  l.write("usr", "10-a.toml", rule("same"));
  l.write("usr", "20-b.toml", rule("same"));
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, {});
  ASSERT_EQ(loaded.errors(), 1U);
  EXPECT_NE(loaded.diagnostics[0].message.find("10-a.toml:1:1"), std::string::npos) << loaded.diagnostics[0].str();
}

TEST(PolicyLayers, RefusesAFileOwnedBySomeoneElse) {
  Layers l;
  auto p = l.write("etc", "50-x.toml", rule("x"));
  config::LoadOptions strict;
  strict.requireOwner = ::geteuid() + 1;  // the file is ours, so not that user's
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, strict);
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(loaded.policies.rules.empty());
  bool named = std::any_of(loaded.diagnostics.begin(), loaded.diagnostics.end(), [&](const Diagnostic& d) {
    return d.where.file == p.string() && d.message.find("owned by uid") != std::string::npos;
  });
  EXPECT_TRUE(named) << lines(loaded.diagnostics)[0];
}

TEST(PolicyLayers, RefusesAFileWritableByGroupOrOthers) {
  Layers l;
  auto p = l.write("etc", "50-x.toml", rule("x"));
  fs::permissions(p, fs::perms::group_write, fs::perm_options::add);
  config::LoadOptions strict;
  strict.requireOwner = ::geteuid();
  fs::permissions(l.root() / "etc", fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, strict);
  ASSERT_EQ(loaded.errors(), 1U) << lines(loaded.diagnostics)[0];
  EXPECT_NE(loaded.diagnostics[0].message.find("chmod go-w"), std::string::npos);
}

// Only we can write the layers: a strict load refuses for nothing else.
void onlyOwnerWrites(const Layers& l) {
  for (const char* d : {"etc", "run", "usr"}) fs::permissions(l.root() / d, fs::perms(0755));
}

bool refuses(const config::Loaded& loaded, const fs::path& where, const std::string& what) {
  return std::any_of(loaded.diagnostics.begin(), loaded.diagnostics.end(), [&](const Diagnostic& d) {
    return d.where.file == where.string() && d.severity == Diagnostic::Severity::Error &&
           d.message.find(what) != std::string::npos;
  });
}

TEST(PolicyLayers, LoadsFilesOnlyTheirOwnerCanWriteWhenStrict) {
  Layers l;
  l.write("etc", "50-x.toml", rule("x"));
  onlyOwnerWrites(l);
  config::LoadOptions strict;
  strict.requireOwner = ::geteuid();
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, strict);
  EXPECT_TRUE(loaded.ok()) << ::testing::PrintToString(lines(loaded.diagnostics));
  EXPECT_EQ(loaded.policies.rules.size(), 1U);
}

TEST(PolicyLayers, RefusesAFileWritableByOthers) {
  Layers l;
  auto p = l.write("etc", "50-x.toml", rule("x"));
  fs::permissions(p, fs::perms::others_write, fs::perm_options::add);
  onlyOwnerWrites(l);
  config::LoadOptions strict;
  strict.requireOwner = ::geteuid();
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, strict);
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(loaded.policies.rules.empty());
  EXPECT_TRUE(refuses(loaded, p, "refusing a policy file writable by group or others (mode 0646)"))
      << ::testing::PrintToString(lines(loaded.diagnostics));
}

TEST(PolicyLayers, RefusesALayerDirectoryGroupOrOthersCanWrite) {
  for (auto mode : {fs::perms(0775), fs::perms(0757), fs::perms(01777)}) {
    Layers l;
    l.write("etc", "50-x.toml", rule("x"));
    onlyOwnerWrites(l);
    fs::permissions(l.root() / "etc", mode);
    config::LoadOptions strict;
    strict.requireOwner = ::geteuid();
    auto loaded = config::loadPolicyFiles(l.dirs(), {}, strict);
    EXPECT_FALSE(loaded.ok());
    EXPECT_TRUE(refuses(loaded, l.root() / "etc", "refusing a policy directory writable by group or others"))
        << ::testing::PrintToString(lines(loaded.diagnostics));
  }
}

TEST(PolicyLayers, RefusesASymlinkToAFileOwnedBySomeoneElseAndNamesTheTarget) {
  Layers l;
  auto target = l.write("usr", "real.toml", rule("x"));
  auto link = l.root() / "etc" / "50-x.toml";
  fs::create_symlink(target, link);
  config::LoadOptions strict;
  strict.requireOwner = ::geteuid() + 1;  // ours, so not that user's
  auto loaded = config::loadPolicyFiles({(l.root() / "etc").string()}, {}, strict);
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(loaded.policies.rules.empty());
  EXPECT_TRUE(refuses(loaded, link, "a symlink to " + target.string() + ": refusing a policy file owned by uid"))
      << ::testing::PrintToString(lines(loaded.diagnostics));
}

TEST(PolicyLayers, RefusesASymlinkIntoADirectoryOthersCanWrite) {
  Layers l;
  auto target = l.write("usr", "real.toml", rule("x"));
  onlyOwnerWrites(l);
  fs::permissions(l.root() / "usr", fs::perms(0777));
  fs::create_symlink(target, l.root() / "etc" / "50-x.toml");
  config::LoadOptions strict;
  strict.requireOwner = ::geteuid();
  auto loaded = config::loadPolicyFiles({(l.root() / "etc").string()}, {}, strict);
  EXPECT_FALSE(loaded.ok());
  EXPECT_TRUE(refuses(loaded, l.root() / "usr", "writable by group or others (mode 0777)"))
      << ::testing::PrintToString(lines(loaded.diagnostics));
}

TEST(PolicyLayers, AcceptsAMaskLinkEvenWhenStrict) {
  Layers l;
  fs::create_symlink("/dev/null", l.root() / "etc" / "30-a.toml");
  config::LoadOptions strict;
  strict.requireOwner = ::geteuid();
  for (const char* d : {"etc", "run", "usr"}) {
    fs::permissions(l.root() / d, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
  }
  auto loaded = config::loadPolicyFiles(l.dirs(), {}, strict);
  EXPECT_TRUE(loaded.ok()) << lines(loaded.diagnostics)[0];
}

TEST(PolicyLoader, AcceptsMultiLineStringsThatEndInQuotesAndTextOutsideAscii) {
  auto parsed = config::parsePolicyText(
      "[[rule]]\nname = \"q\"\ndescription = \"\"\"say \"\"yes\"\"\"\"\"\n"
      "# Größe, 大小\ndomain = \"DMA\"\n[rule.match]\nname = '''[[[['''''\n",
      "q.toml");
  ASSERT_TRUE(parsed.diagnostics.empty()) << lines(parsed.diagnostics)[0];
  EXPECT_EQ(parsed.rules.at(0).description, "say \"\"yes\"\"");
  EXPECT_EQ(parsed.rules.at(0).device.names.at(0).str(), "[[[[''");
}

TEST(PolicyLoader, KeepsEachDiagnosticOnOneLine) {
  auto parsed =
      config::parsePolicyText("[[rule]]\nname = \"two\\nlines\"\ndescription = \"x\"\ndomain = \"DMA\"\n", "n.toml");
  ASSERT_EQ(parsed.diagnostics.size(), 1U);
  EXPECT_EQ(parsed.diagnostics[0].str().find('\n'), std::string::npos) << parsed.diagnostics[0].str();
  EXPECT_NE(parsed.diagnostics[0].str().find("two\\nlines"), std::string::npos) << parsed.diagnostics[0].str();
}

TEST(PolicyLoader, ReadsWhenBootAndSaysItBack) {
  auto parsed = config::parsePolicyText(R"(
[[rule]]
name = "root-nvme"
description = "identity for the root NVMe, before anything holds it"
when = "boot"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
)",
                                        "p.toml");
  ASSERT_TRUE(parsed.diagnostics.empty()) << lines(parsed.diagnostics)[0];
  ASSERT_EQ(parsed.rules.size(), 1U);
  EXPECT_EQ(parsed.rules[0].when, core::When::Boot);
  EXPECT_EQ(core::toString(core::When::Boot), "boot");
}

std::string firstDiagnostic(const std::string& text) {
  auto parsed = config::parsePolicyText(text, "p.toml");
  return parsed.diagnostics.empty() ? "" : parsed.diagnostics.front().str();
}

TEST(PolicyLoader, AMisspeltKeyGetsTheNearestValidKey) {
  EXPECT_EQ(firstDiagnostic(rule("x", "acept = [\"no-isolation\"]\n")),
            "p.toml:5:1: error: unknown key 'acept' in [[rule]]; did you mean 'accept'?");
  EXPECT_EQ(firstDiagnostic(rule("x", "[rule.match]\nknd = \"nic\"\n")),
            "p.toml:6:1: error: unknown key 'knd' in [rule.match]; did you mean 'kind'?");
  // Nothing near: the keys allowed there.
  EXPECT_EQ(firstDiagnostic(rule("x", "colour = \"blue\"\n")),
            "p.toml:5:1: error: unknown key 'colour' in [[rule]]; expected one of: name, description, mode, when, "
            "accept, domain, match, unless, host, rings, channels, coalesce, param");
}

// toml11's own words name what its parser met ("an invalid key appeared" for `[[rule]`); the
// usual mistakes are said as the writer made them, at the place of the mistake.
TEST(PolicyLoader, ASyntaxErrorNamesItsCause) {
  EXPECT_EQ(firstDiagnostic("[[rule]\nname = \"x\"\n"),
            "p.toml:1:8: error: the table header '[[rule]' lacks its closing ']]'");
  EXPECT_EQ(firstDiagnostic("[[rule]]\n[rule.match   # kinds\nkind = \"nic\"\n"),
            "p.toml:2:12: error: the table header '[rule.match' lacks its closing ']'");
  EXPECT_EQ(firstDiagnostic("[[rule]]\nname = \"x\n"),
            "p.toml:2:8: error: the string opened by \" at column 8 is not closed on its line (strings end with \" on "
            "the line they start on)");
  EXPECT_EQ(firstDiagnostic("[[rule]]\nname \"x\"\n"), "p.toml:2:5: error: '=' missing between the key and its value");
  EXPECT_EQ(firstDiagnostic("[[rule]]\nname = \"x\"\nname = \"y\"\n"),
            "p.toml:3:8: error: key 'name' is defined twice (first at line 2); a key may appear once");
  EXPECT_EQ(firstDiagnostic(rule("x", "[rule.match]\nkind = \"nic\"\n[rule.match]\n")),
            "p.toml:7:1: error: table [rule.match] is defined twice (first at line 5); a table may appear once");
  EXPECT_EQ(firstDiagnostic("[[rule]]\nname = x\n"),
            "p.toml:2:8: error: 'x' is not a value: quote strings (\"...\"), and write booleans true or false, "
            "numbers in digits");
  EXPECT_EQ(firstDiagnostic("[[rule]]\nname = \"x\" junk\n"),
            "p.toml:2:12: error: 'junk' after the value: one key = value per line (a comment starts with #)");
  EXPECT_EQ(firstDiagnostic("[[rule]]\nname =\n"), "p.toml:2:7: error: no value after '='");
  EXPECT_EQ(firstDiagnostic("[[rule]]\nname = [1, 2\n"),
            "p.toml:2:8: error: the array opened here is not closed: ',' between values and ']' at its end");
}

}  // namespace policy_loader_test
