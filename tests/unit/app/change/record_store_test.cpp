// The record store against damage to its own files: each records file as a real scenario writes
// it, damaged in every way a program can enumerate (every truncation, every JSON value turned into
// every other type, each entry deleted or duplicated, an entry of an unknown kind or with an
// unknown key, the file oversize, a directory, a FIFO, a link), then read as status and verify
// read it, applied again, reverted (the daemon's start and revert-on-stop do the same), and the
// files kept aside reverted with `revert --from`. Nothing may throw, damage must be reported, and
// every record that stayed intact must be given back exactly.
#include "app/change/record_store.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/change/current_values.hpp"
#include "app/change/reconcile.hpp"
#include "core/state_findings.hpp"
#include "core/text.hpp"
#include "support/scenarios.hpp"
#include "unit/app/change/apply_bench.hpp"
#include "unit/crash_sweep.hpp"

namespace record_store_test {

using namespace iommud;
using namespace iommud::testing;
using core::ChangeKind;
using Json = nlohmann::json;
namespace fs = std::filesystem;

std::string readText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void writeText(const fs::path& p, std::string_view text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// The setting a record names, as crash_sweep::hostSettings keys it (plus the fake ethtool's).
std::string settingOf(const app::ChangeRecord& r) {
  switch (r.kind) {
    case ChangeKind::Domain: return "group " + std::to_string(r.group.value_or(-1));
    case ChangeKind::ModuleParam: return "param " + r.object;
    case ChangeKind::ModprobeConf: return "file " + r.object;
    default: return "ethtool " + r.key;
  }
}

std::map<std::string, std::string> settingsOf(const Bench& b) {
  auto out = crash_sweep::hostSettings(b.host->root());
  for (const auto& [k, v] : b.ethtool.values) out["ethtool " + k.second] = std::to_string(v);
  return out;
}

bool sameEverything(const app::ChangeRecord& a, const app::ChangeRecord& b) {
  return adapters::state::recordsText({a}).valueOr(std::string("a")) ==
         adapters::state::recordsText({b}).valueOr(std::string("b"));
}

struct Scenario {
  const char* name;
  std::function<std::unique_ptr<FakeHost>()> host;
  std::function<void(FakeEthtool&)> nic;
  std::string policy;
};

// One damage: what it does to the file at `path` (host path), and whether a reader can tell.
struct Damage {
  std::string name;
  std::function<void(const fs::path&)> apply;
  bool detectable = true;  // false: a valid file with fewer records (an entry deleted)
};

// The scenario applied on a fresh host, the file damaged, then everything a user or the daemon
// does next; what went wrong, or "".
std::string runDamaged(const Scenario& s, const std::string& file, const Damage& damage) {
  Bench b(s.host(), {6, 12, 30});
  if (s.nic) s.nic(b.ethtool);
  const auto start = settingsOf(b);
  const auto policies = rules(s.policy);
  b.apply(policies);
  const fs::path path = b.root.hostPath(file);
  const auto before = adapters::state::readRecordsFile(path.string());
  if (!before || !*before || !(*before)->whole()) return "the scenario's own file does not read whole";
  const auto original = (*before)->records;
  damage.apply(path);

  // The records that stayed intact: every record of another file, and each of this file's that
  // reads exactly as it was written. The copy of /run's records holds them too, so /run's are
  // intact while the copy is (an entry deleted from a valid /run reads as lost to a reboot: that
  // damage cannot be told from one).
  std::vector<app::ChangeRecord> intact;
  const app::StatePaths& paths = b.ctx.paths;
  for (const auto& other :
       {paths.runDir + "/changes.json", paths.stateDir + "/changes.json", paths.stateDir + "/runtime-changes.json"}) {
    if (other == file) continue;
    auto read = adapters::state::readRecordsFile(b.root.hostPath(other));
    if (!read || !*read) continue;
    const bool copyOfRun = other.ends_with("runtime-changes.json");
    if (copyOfRun && !(file.starts_with(paths.runDir) && damage.detectable)) continue;
    intact.insert(intact.end(), (*read)->records.begin(), (*read)->records.end());
  }
  if (auto read = adapters::state::readRecordsFile(path.string()); read && *read) {
    for (const auto& r : (*read)->records) {
      if (std::any_of(original.begin(), original.end(), [&](const auto& o) { return sameEverything(o, r); }))
        intact.push_back(r);
    }
  }

  std::string problem;
  try {
    // status and verify, as they read.
    auto view = app::readRecordsView(b.root, paths);
    if (damage.detectable && view.damage.empty()) problem += "status and verify report no damage\n";
    app::verifyRecords(view.records, app::observeRecords(b.root, view.records, &b.ethtool, ""));
    // apply again: nothing that weakens protection may be made while the damage stands.
    auto again = b.apply(policies);
    for (const auto& o : again) {
      if (o.result == app::Outcome::Result::Done && o.risk != core::Risk::None)
        problem += "made a change that weakens protection: " + o.message + "\n";
    }
    // The daemon's start (recovery) and revert-on-stop, or iommuctl revert.
    {
      auto session = app::beginWriting(b.ctx);
      if (!session) problem += "the next start failed: " + session.error().describe() + "\n";
      if (damage.detectable && session && session->degraded().empty()) problem += "the start is not degraded\n";
    }
    auto reverted = b.revert();
    // iommuctl revert --from each file kept aside.
    for (const auto& d : app::readRecordsView(b.root, paths).damage) {
      if (d.keptAs.empty()) continue;
      app::revertChanges(std::nullopt, b.status().host, b.ctx, b.root.hostPath(d.keptAs));
    }
  } catch (const std::exception& e) {
    problem += std::string("threw: ") + e.what() + "\n";
  }
  const auto after = settingsOf(b);
  for (const auto& r : intact) {
    const auto key = settingOf(r);
    auto was = start.find(key);
    auto now = after.find(key);
    const std::string w = was == start.end() ? "(none)" : was->second;
    const std::string n = now == after.end() ? "(none)" : now->second;
    if (w != n) problem += "intact record not given back: " + key + " is " + n + ", was " + w + "\n";
  }
  // The damaged file itself is never written over: it is kept, as it was, or moved aside.
  return problem;
}

// Every JSON value of `j` (paths into it), depth first.
void valuePaths(const Json& j, const Json::json_pointer& at, std::vector<Json::json_pointer>& out) {
  if (!at.empty()) out.push_back(at);
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) valuePaths(v, at / k, out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) valuePaths(j[i], at / i, out);
  }
}

std::vector<Damage> damagesOf(const std::string& text) {
  std::vector<Damage> out;
  const Json doc = Json::parse(text);
  for (size_t n = 0; n < text.size(); ++n) {
    // Only the last newline cut: the same records, no damage.
    const bool same = Json::parse(text.substr(0, n), nullptr, false) == doc;
    out.push_back({"cut to " + std::to_string(n) + " bytes",
                   [text, n](const fs::path& p) { writeText(p, text.substr(0, n)); }, !same});
  }
  std::vector<Json::json_pointer> values;
  valuePaths(doc, Json::json_pointer(), values);
  const std::vector<std::pair<std::string, Json>> kinds = {{"null", nullptr},
                                                           {"true", true},
                                                           {"a number", 7},
                                                           {"a string", "7"},
                                                           {"an array", Json::array()},
                                                           {"an object", Json::object()},
                                                           {"-1", -1},
                                                           {"a fraction", 0.5}};
  for (const auto& v : values) {
    for (const auto& [what, value] : kinds) {
      // Another value of the same type is no damage a reader can tell (a group 20 that reads 7),
      // as a deleted entry is not: only what no valid record holds (-1, 0.5) is.
      const bool invalidNumber = value.is_number() && (value.is_number_float() || value.get<int>() < 0);
      if (doc.at(v).type() == value.type() && !invalidNumber) continue;
      if (doc.at(v).is_number() && value.is_number() && !invalidNumber) continue;
      // A group is a number or null, but for a domain change (which must name one).
      const auto entry = v.to_string().substr(0, v.to_string().find('/', 1));
      const bool domain = doc.at(Json::json_pointer(entry)).value("kind", "") == "domain";
      if (v.back() == "group" && !domain && (value.is_null() || (value.is_number() && !invalidNumber))) continue;
      Json d = doc;
      d[v] = value;
      out.push_back({v.to_string() + " as " + what, [t = d.dump(2)](const fs::path& p) { writeText(p, t); }});
    }
  }
  for (size_t i = 0; i < doc.size(); ++i) {
    Json del = doc;
    del.erase(i);
    out.push_back(
        {"entry " + std::to_string(i) + " deleted", [t = del.dump(2)](const fs::path& p) { writeText(p, t); }, false});
    Json dup = doc;
    dup.insert(dup.begin() + static_cast<std::ptrdiff_t>(i), doc[i]);
    out.push_back(
        {"entry " + std::to_string(i) + " twice", [t = dup.dump(2)](const fs::path& p) { writeText(p, t); }, false});
    Json key = doc;
    key[i]["added-by-a-newer-version"] = 1;
    out.push_back({"entry " + std::to_string(i) + " with an unknown key",
                   [t = key.dump(2)](const fs::path& p) { writeText(p, t); }});
  }
  Json unknown = doc;
  unknown.push_back({{"kind", "offload"},
                     {"device", "0000:03:00.0"},
                     {"object", "x"},
                     {"key", "tso"},
                     {"original", "on"},
                     {"written", "off"}});
  out.push_back({"an entry of an unknown kind", [t = unknown.dump(2)](const fs::path& p) { writeText(p, t); }});
  out.push_back({"oversize", [text](const fs::path& p) {
                   writeText(p, text + std::string(adapters::state::kMaxRecordsBytes, ' '));
                 }});
  out.push_back({"a directory", [](const fs::path& p) {
                   fs::remove(p);
                   fs::create_directory(p);
                 }});
  out.push_back({"a FIFO", [](const fs::path& p) {
                   fs::remove(p);
                   ::mkfifo(p.c_str(), 0600);
                 }});
  out.push_back({"a link to a copy", [text](const fs::path& p) {
                   fs::remove(p);
                   writeText(p.string() + ".elsewhere", text);
                   fs::create_symlink(p.filename().string() + ".elsewhere", p);
                 }});
  return out;
}

struct Count {
  int points = 0;
  std::vector<std::string> lost;
};

Count sweep(const Scenario& s, const std::string& file) {
  const crash_sweep::HostsInMemory inMemory;
  Bench b(s.host(), {6, 12, 30});
  if (s.nic) s.nic(b.ethtool);
  b.apply(rules(s.policy));
  const std::string text = readText(b.root.hostPath(file));
  EXPECT_FALSE(text.empty()) << s.name << " writes " << file;
  Count out;
  for (const auto& d : damagesOf(text)) {
    ++out.points;
    auto p = runDamaged(s, file, d);
    if (!p.empty()) out.lost.push_back(file + ", " + d.name + ":\n" + p);
  }
  return out;
}

const Scenario kDomains{"two domain changes", [] { return twoNvmePairs(); }, nullptr, kNvmeIdentity};
const Scenario kNic{"a parameter, a modprobe.d file and rings", [] { return thunderboltNicWithModule(); },
                    [](FakeEthtool& e) {
                      e.values = {{{ChangeKind::Rings, "rx"}, 2048}, {{ChangeKind::Rings, "tx"}, 4096}};
                    },
                    std::string(kAtlanticItr) + "[rule.rings]\nrx = \"max\"\ntx = \"max\"\n"};

void expectNothingLost(const Scenario& s, const std::string& file) {
  auto c = sweep(s, file);
  std::string all;
  for (size_t i = 0; i < c.lost.size() && i < 5; ++i) all += c.lost[i];
  EXPECT_TRUE(c.lost.empty()) << c.lost.size() << " of " << c.points << " damages lost something; the first:\n" << all;
  std::printf("%s, %s: %d damages, %zu lost\n", s.name, file.c_str(), c.points, c.lost.size());
}

TEST(DamageSweep, TheRuntimeRecordsOfTwoDomainChanges) {
  expectNothingLost(kDomains, "/run/iommud/changes.json");
}

TEST(DamageSweep, TheCopyOfTheRuntimeRecordsOfTwoDomainChanges) {
  expectNothingLost(kDomains, "/var/lib/iommud/runtime-changes.json");
}

TEST(DamageSweep, TheRuntimeRecordsOfAParameterAndRings) {
  expectNothingLost(kNic, "/run/iommud/changes.json");
}

TEST(DamageSweep, ThePersistentRecordOfAModprobeFile) {
  expectNothingLost(kNic, "/var/lib/iommud/changes.json");
}

// Each entry is read on its own with its types checked: another type is said in words, not
// thrown, and the entries around it are read.
TEST(ChangeRecords, AFieldOfAnotherTypeOrAnUnknownKindIsReportedAndTheOthersAreRead) {
  const std::string good = R"({"kind": "domain", "device": "0000:03:00.0", "group": 20, "object": "group 20",
      "key": "type", "original": "DMA-FQ", "written": "identity", "ifindex": 0})";
  auto wrongType = adapters::state::parseRecordsFile(
      "[" + good + R"(, {"kind": "rings", "device": "0000:05:00.0", "group": null, "object": "enp5s0", "key": "rx",
      "original": "2048", "written": "8184", "ifindex": "0"}, {"kind": "offload", "device": "x", "object": "y",
      "key": "tso", "original": "on", "written": "off"}])");
  ASSERT_EQ(wrongType.records.size(), 1U);
  EXPECT_EQ(wrongType.records[0].group, 20);
  ASSERT_EQ(wrongType.damage.size(), 2U);
  EXPECT_EQ(wrongType.damage[0], "entry 2: \"ifindex\" is a string, not a whole number from 0 up");
  EXPECT_EQ(wrongType.damage[1], "entry 3: a change of kind \"offload\", which this version does not know");
  auto cut = adapters::state::parseRecordsFile("[" + good + ", " + good.substr(0, 40));
  EXPECT_EQ(cut.records.size(), 1U);
  EXPECT_EQ(cut.damage, std::vector<std::string>{"entry 2 is not JSON: the file ends inside it (cut short)"});
}

// The review's reproduction: /run's records cut by 3 bytes after two groups were put to identity.
// Before, verify found nothing, the next save wrote `[]` and revert left both groups identity.
TEST(RecordStore, ARecordsFileCutShortIsKeptAsideReportedAndEveryChangeIsStillGivenBack) {
  const crash_sweep::HostsInMemory inMemory;
  Bench b(twoNvmePairs(), {6, 12, 30});
  const auto start = settingsOf(b);
  b.apply(rules(kNvmeIdentity));
  const fs::path file = b.root.hostPath("/run/iommud/changes.json");
  const std::string text = readText(file);
  writeText(file, text.substr(0, text.size() - 3));
  const std::string damaged = readText(file);

  auto view = app::readRecordsView(b.root, b.ctx.paths);
  ASSERT_EQ(view.damage.size(), 1U);
  EXPECT_EQ(view.records.size(), 2U) << "the intact one, and the other from the state directory's copy";
  auto findings = core::damageFindings(view.damage);
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].id, "state-file-damaged");
  EXPECT_NE(findings[0].summary.find("it ends before its last ] (cut short)"), std::string::npos)
      << findings[0].summary;

  auto applied = b.apply(rules(kNvmeIdentity));  // the next writer
  const auto kept = app::readRecordsView(b.root, b.ctx.paths).damage;
  ASSERT_EQ(kept.size(), 1U) << describe(applied);
  ASSERT_FALSE(kept[0].keptAs.empty());
  EXPECT_EQ(readText(b.root.hostPath(kept[0].keptAs)), damaged) << "kept as it was, byte for byte";
  EXPECT_NE(describe(applied).find("moved aside as /run/iommud/changes.json.damaged-20261121T120000Z"),
            std::string::npos)
      << describe(applied);

  auto reverted = b.revert();
  EXPECT_EQ(crash_sweep::differences(start, settingsOf(b)), "") << describe(reverted);
  auto from = app::revertChanges(std::nullopt, b.status().host, b.ctx, b.root.hostPath(kept[0].keptAs));
  EXPECT_TRUE(app::readRecordsView(b.root, b.ctx.paths).damage.empty()) << describe(from);
  EXPECT_TRUE(fs::exists(b.root.hostPath(kept[0].keptAs) + ".reverted"));
}

// While a damaged file stands, a change that gives up protection is refused; one that costs none is made.
TEST(RecordStore, NoChangeThatWeakensProtectionIsMadeWhileAFileIsNotUnderstood) {
  const crash_sweep::HostsInMemory inMemory;
  Bench b(twoNvmePairs(), {6, 12, 30});
  fs::create_directories(b.root.hostPath("/run/iommud"));
  writeText(b.root.hostPath("/run/iommud/changes.json"), "[{\"kind\": \"domain\", \"group\": \"20\"}]");
  auto applied = b.apply(rules(kNvmeIdentity));
  EXPECT_EQ(count(applied, app::Outcome::Result::Done), 0) << describe(applied);
  EXPECT_EQ(count(applied, app::Outcome::Result::Refused), 2) << describe(applied);
  EXPECT_EQ(b.read("/sys/kernel/iommu_groups/20/type"), "DMA-FQ\n");
}

// A writer killed while it saved leaves its temporary: the next writer sweeps it.
TEST(RecordStore, AKilledWritersTemporariesAreSweptByTheNextWriter) {
  const crash_sweep::HostsInMemory inMemory;
  Bench b(twoNvmePairs(), {6, 12, 30});
  fs::create_directories(b.root.hostPath("/run/iommud"));
  fs::create_directories(b.root.hostPath("/var/lib/iommud"));
  writeText(b.root.hostPath("/run/iommud/.changes.json.tmp.k1ll3d"), "[");
  writeText(b.root.hostPath("/var/lib/iommud/.runtime-changes.json.tmp.k1ll3d"), "[");
  writeText(b.root.hostPath("/run/iommud/.other.tmp.k1ll3d"), "not ours");
  b.apply(rules(""));
  EXPECT_FALSE(fs::exists(b.root.hostPath("/run/iommud/.changes.json.tmp.k1ll3d")));
  EXPECT_FALSE(fs::exists(b.root.hostPath("/var/lib/iommud/.runtime-changes.json.tmp.k1ll3d")));
  EXPECT_TRUE(fs::exists(b.root.hostPath("/run/iommud/.other.tmp.k1ll3d")));
}

// Revert writes only modprobe.d files of iommud's own name and module parameters: a record that
// names another file (a records file edited or planted) is refused, the file left alone.
TEST(RecordStore, ARecordNamingAFileIommudNeverWritesIsNotReverted) {
  const crash_sweep::HostsInMemory inMemory;
  Bench b(twoNvmePairs(), {6, 12, 30});
  fs::create_directories(b.root.hostPath("/etc"));
  writeText(b.root.hostPath("/etc/fstab"), "precious\n");
  app::ChangeRecord r;
  r.kind = ChangeKind::ModprobeConf;
  r.device = "0000:03:00.0";
  r.object = "/etc/fstab";
  r.key = "(file)";
  r.written = "precious\n";
  r.existed = false;  // revert would remove it
  app::ChangeRecord p = r;
  p.kind = ChangeKind::ModuleParam;
  p.object = "../../../etc/fstab";
  p.key = "x";
  p.original = "0";
  ASSERT_TRUE(adapters::state::saveRecords(b.root, "/var/lib/iommud/changes.json", {r}).ok());
  ASSERT_TRUE(adapters::state::saveRecords(b.root, "/run/iommud/changes.json", {p}).ok());
  auto reverted = b.revert();
  EXPECT_EQ(readText(b.root.hostPath("/etc/fstab")), "precious\n") << describe(reverted);
  EXPECT_EQ(count(reverted, app::Outcome::Result::Refused), 2) << describe(reverted);
  EXPECT_NE(describe(reverted).find("is not a file iommud writes"), std::string::npos) << describe(reverted);
}

// A parameter's record holds the value read just before the write, not the plan's, which may be
// seconds old: revert restores what was there.
TEST(RecordStore, AParameterRecordsTheValueReadJustBeforeItsWrite) {
  const crash_sweep::HostsInMemory inMemory;
  Bench b(thunderboltNicWithModule(), {6, 12, 30});
  auto s = b.status();
  core::PlanOptions o;
  o.trigger = core::Trigger::Hotplug;
  auto plan = core::plan({s.host, s.mode, s.findings}, rules(kAtlanticItr), o);
  const std::string param = "/sys/module/atlantic/parameters/aq_itr";
  const std::string planned = std::string(core::trim(b.read(param)));
  b.host->write(param, "500\n");  // changed by someone else after the plan was made
  app::listInitramfsFor(b.root, plan, s);
  auto applied = app::applyPlan(plan, s.host, b.ctx);
  auto records = app::readRecords(b.root, b.ctx.paths);
  auto it = std::find_if(records.begin(), records.end(),
                         [](const app::ChangeRecord& x) { return x.kind == ChangeKind::ModuleParam; });
  ASSERT_NE(it, records.end()) << describe(applied);
  EXPECT_NE(planned, "500");
  EXPECT_EQ(it->original, "500");
  b.revert();
  EXPECT_EQ(std::string(core::trim(b.read(param))), "500");
}

}  // namespace record_store_test
