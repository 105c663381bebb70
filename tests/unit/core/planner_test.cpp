#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "app/change/planning.hpp"
#include "app/report/plan_report.hpp"
#include "config/policy_loader.hpp"
#include "core/plan.hpp"
#include "support/scenarios.hpp"
#include "unit/golden.hpp"
#include "unit/test_host.hpp"

namespace planner_test {

using namespace iommud;
using namespace iommud::testing;
using core::ChangeKind;
using core::SkipReason;
using core::Trigger;

const std::string kShipped = std::string(IOMMUD_TEST_DATA) + "/../../policies";

core::PolicySet shipped() {
  auto loaded = config::loadPolicyFiles({kShipped}, {}, {});
  for (const auto& d : loaded.diagnostics) ADD_FAILURE() << d.str();
  return loaded.policies;
}

core::Plan planOf(const app::Status& s, const core::PolicySet& p, Trigger t = Trigger::Coldplug,
                  std::optional<std::string> device = std::nullopt) {
  core::PlanOptions o;
  o.trigger = t;
  o.device = std::move(device);
  o.reportOverridden = true;
  return core::plan({s.host, s.mode, s.findings}, p, o);
}

// The plan as JSON, with the source tree's path to the shipped policies made relative.
std::string planJson(const core::Plan& plan, const core::PolicySet& p) {
  std::string json = app::planJson(plan, p);
  std::string from = kShipped + "/";
  for (size_t at = json.find(from); at != std::string::npos; at = json.find(from, at)) {
    json.replace(at, from.size(), "policies/");
  }
  return json;
}

void setEthtool(app::Status& s, const std::string& address, core::EthtoolState e) {
  auto* d = s.host.device(address);
  ASSERT_NE(d, nullptr);
  ASSERT_FALSE(d->netdevs.empty());
  d->netdevs.front().ethtool = std::move(e);
}

core::EthtoolState atlanticDefaults() {
  core::EthtoolState e;
  e.read = true;
  e.rings = {{"rx", 2048}, {"tx", 4096}};
  e.ringsMax = {{"rx", 8184}, {"tx", 8184}};
  e.channels = {{"combined", 8}};
  e.channelsMax = {{"combined", 8}};
  e.coalesce = {{"rx-usecs", 256}, {"rx-frames", 0}, {"tx-usecs", 1022}, {"tx-frames", 0}};
  return e;
}

constexpr const char* kNic = "0000:05:00.0";    // the Thunderbolt AQC100
constexpr const char* kNvme0 = "0000:03:00.0";  // twoNvmeOneGroup
constexpr const char* kNvme1 = "0000:04:00.0";

// The Thunderbolt NIC as the atlantic driver sets it up.
void atlanticAtDefaults(app::Status& s) {
  setEthtool(s, kNic, atlanticDefaults());
}

// --- The policies of the cases ---

// A safety rule at start: no rule resets the link of a NIC that carries traffic, even one that
// says when = "always" (package installation and restarts start the daemon on a running machine).
constexpr const char* kAlwaysRings = R"(
[[rule]]
name = "always-rings"
description = "largest rings, at start too"
when = "always"
[rule.match]
kind = "nic"
[rule.rings]
rx = "max"
)";

constexpr const char* kParamRules = R"(
[[rule]]
name = "itr"
description = "parameters"
[rule.match]
driver = "atlantic"
[[rule.param]]
name = "aq_itr"
value = 0
[[rule.param]]
name = "aq_itr_rx"
value = 64
[[rule.param]]
name = "rxpageorder"
value = 3
optional = true
[[rule.param]]
name = "aq_itr_tx"
value = 128
[[rule.param]]
name = "aq_itr_rx"
value = 64
at = "load"
)";

// The parameter rules, marked for boot.
std::string bootParamRules() {
  std::string text = kParamRules;
  text.insert(text.find("[rule.match]"), "when = \"boot\"\n");
  return text;
}

// Identity for every NVMe drive at boot, and a runtime parameter of atlantic at start: the first
// is the initramfs's, the second the daemon's.
constexpr const char* kBootAndStart = R"(
[[rule]]
name = "nvme-boot"
description = "identity at boot"
when = "boot"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"

[[rule]]
name = "nvme-hotplug"
description = "DMA when hot-plugged"
when = "hotplug"
domain = "DMA"
[rule.match]
kind = "nvme"
address = "0000:99:*"

[[rule]]
name = "itr"
description = "parameters at start"
when = "always"
[rule.match]
driver = "atlantic"
[[rule.param]]
name = "aq_itr"
value = 0
)";

// --- A case of the tables: a host, a policy, a trigger, and what the plan must be ---

// What a change (or the first of its kind and key) must be; a field left unset is not checked.
struct ChangeIs {
  std::optional<ChangeKind> kind;
  std::optional<std::string> device;
  std::optional<std::string> key;
  std::optional<std::string> from;
  std::optional<std::string> to;
  std::optional<std::string> rule;  // its name
  std::optional<int> ruleLine;      // the line it is written at
  std::optional<core::RuleMode> mode;
  std::optional<core::Risk> risk;
  std::optional<bool> disruptive;
  std::optional<bool> irreversible;
  std::optional<int> group;
  std::optional<std::vector<std::string>> devices;
  std::optional<std::string> tradeOffSays;  // a part of its trade-off
  std::optional<std::string> note;
  std::optional<bool> rebuild;  // it names an initramfs to rebuild
  std::optional<std::string> rebuildImage;
  std::optional<std::string> rebuildCommand;
  std::optional<bool> rebuildChecked;
};

// What a skip (or the first of its reason) must be; a field left unset is not checked.
struct SkipIs {
  std::optional<SkipReason> reason;
  std::optional<ChangeKind> kind;
  std::optional<std::string> device;
  std::optional<std::string> key;
  std::optional<std::string> rule;  // its name
  std::vector<std::string> says;    // parts of its message
};

// What a setting already as wanted must be.
struct SatisfiedIs {
  std::optional<ChangeKind> kind;
  std::optional<std::string> object;
};

using Changes = std::vector<ChangeIs>;

// What the plan must be; what is left unset or empty is not checked. The plan's trigger always is.
struct PlanIs {
  const char* golden = nullptr;     // its JSON is this file under tests/data
  std::optional<Changes> changes;   // exactly these, in order (Changes{}: none)
  std::optional<ChangeIs> every;    // there are changes, and each is so
  std::vector<ChangeIs> has;        // the first change of each one's kind (and key) is so
  std::vector<ChangeIs> hasNo;      // no change is so
  std::vector<SkipIs> skips;        // the first skip of each one's reason is so
  std::vector<SkipIs> noSkips;      // no skip is so
  std::optional<size_t> skipCount;  // how many skips
  std::optional<size_t> satisfiedCount;
  std::vector<SatisfiedIs> satisfied;    // each is among the settings already as wanted
  std::vector<std::string> unmentioned;  // rules the plan says nothing of
  std::vector<std::string> textSays;     // parts of `iommuctl plan`'s text
  std::vector<std::string> jsonSays;     // parts of its JSON
};

const std::optional<std::string> kShippedPolicies = std::nullopt;

// One row of a table: a test of its own, named by its first field.
struct PlanCase {
  const char* name;  // the test's name, a sentence as ever
  std::function<std::unique_ptr<FakeHost>()> host;
  std::function<void(app::Status&)> given;  // sets (or checks) on the host read what the case is about
  std::optional<std::string> policy;        // TOML, or kShippedPolicies
  Trigger trigger;
  PlanIs want;
};

template <typename T>
std::string shown(const T& v) {
  if constexpr (requires { toString(v); }) {
    return std::string(toString(v));
  } else {
    return ::testing::PrintToString(v);
  }
}

template <typename T>
std::string shown(const std::optional<T>& v) {
  return v ? shown(*v) : "unset";
}

// Adds to `out` how `got` differs from `want`, when a value is wanted.
template <typename W, typename G>
void differs(std::vector<std::string>& out, const char* what, const std::optional<W>& want, const G& got) {
  if (want && !(got == *want)) out.push_back(std::string(what) + " is " + shown(got) + ", not " + shown(*want));
}

void lacks(std::vector<std::string>& out, const char* what, const std::string& text, const std::string& part) {
  if (text.find(part) == std::string::npos)
    out.push_back(std::string(what) + " \"" + text + "\" does not say \"" + part + "\"");
}

std::vector<std::string> mismatches(const core::Change& c, const ChangeIs& w) {
  std::vector<std::string> out;
  differs(out, "kind", w.kind, c.kind);
  differs(out, "device", w.device, c.device);
  differs(out, "key", w.key, c.key);
  differs(out, "from", w.from, c.from);
  differs(out, "to", w.to, c.to);
  differs(out, "rule", w.rule, c.rule.name);
  differs(out, "rule's line", w.ruleLine, c.rule.where.line);
  differs(out, "mode", w.mode, c.mode);
  differs(out, "risk", w.risk, c.risk);
  differs(out, "disruptive", w.disruptive, c.disruptive);
  differs(out, "irreversible", w.irreversible, c.irreversible);
  differs(out, "group", w.group, c.group);
  differs(out, "devices", w.devices, c.devices);
  if (w.tradeOffSays) lacks(out, "trade-off", c.tradeOff, *w.tradeOffSays);
  differs(out, "note", w.note, c.note);
  differs(out, "has an initramfs to rebuild", w.rebuild, c.initramfs.has_value());
  if (!c.initramfs) {
    if (w.rebuildImage || w.rebuildCommand || w.rebuildChecked) out.emplace_back("names no initramfs to rebuild");
    return out;
  }
  differs(out, "initramfs", w.rebuildImage, c.initramfs->image);
  differs(out, "rebuild command", w.rebuildCommand, c.initramfs->command);
  differs(out, "initramfs checked", w.rebuildChecked, c.initramfs->checked);
  return out;
}

std::vector<std::string> mismatches(const core::Skip& s, const SkipIs& w) {
  std::vector<std::string> out;
  differs(out, "reason", w.reason, s.reason);
  differs(out, "kind", w.kind, s.kind);
  differs(out, "device", w.device, s.device);
  differs(out, "key", w.key, s.key);
  differs(out, "rule", w.rule, s.rule.name);
  for (const auto& part : w.says) lacks(out, "message", s.message, part);
  return out;
}

std::vector<std::string> mismatches(const core::Satisfied& s, const SatisfiedIs& w) {
  std::vector<std::string> out;
  differs(out, "kind", w.kind, s.kind);
  differs(out, "object", w.object, s.object);
  return out;
}

template <typename Thing, typename Is>
bool isSo(const Thing& thing, const Is& want) {
  return mismatches(thing, want).empty();
}

template <typename Thing, typename Is>
void expectSo(const Thing& thing, const Is& want, size_t at) {
  for (const auto& m : mismatches(thing, want)) ADD_FAILURE() << "#" << at << ": " << m;
}

bool mentions(const core::Plan& p, const std::string& rule) {
  auto named = [&](const auto& x) { return x.rule.name == rule; };
  return std::any_of(p.changes.begin(), p.changes.end(), named) || std::any_of(p.skips.begin(), p.skips.end(), named) ||
         std::any_of(p.satisfied.begin(), p.satisfied.end(), named);
}

void expectChanges(const core::Plan& plan, const PlanIs& want) {
  if (want.changes) {
    ASSERT_EQ(plan.changes.size(), want.changes->size());
    for (size_t i = 0; i < plan.changes.size(); ++i) expectSo(plan.changes[i], (*want.changes)[i], i);
  }
  if (want.every) {
    EXPECT_FALSE(plan.changes.empty());
    for (size_t i = 0; i < plan.changes.size(); ++i) expectSo(plan.changes[i], *want.every, i);
  }
  for (const auto& w : want.has) {
    auto first = std::find_if(plan.changes.begin(), plan.changes.end(),
                              [&](const core::Change& c) { return c.kind == w.kind && (!w.key || c.key == *w.key); });
    if (first == plan.changes.end()) {
      ADD_FAILURE() << "no " << shown(w.kind) << " change" << (w.key ? " of " + *w.key : "");
      continue;
    }
    expectSo(*first, w, static_cast<size_t>(first - plan.changes.begin()));
  }
  for (const auto& w : want.hasNo) {
    for (size_t i = 0; i < plan.changes.size(); ++i) {
      const auto& c = plan.changes[i];
      EXPECT_FALSE(isSo(c, w)) << "#" << i << " (" << shown(c.kind) << " " << c.object << " " << c.key
                               << ") is a change the case rules out";
    }
  }
}

void expectSkips(const core::Plan& plan, const PlanIs& want) {
  for (const auto& w : want.skips) {
    auto first =
        std::find_if(plan.skips.begin(), plan.skips.end(), [&](const core::Skip& s) { return s.reason == w.reason; });
    if (first == plan.skips.end()) {
      ADD_FAILURE() << "no skip for " << shown(w.reason);
      continue;
    }
    expectSo(*first, w, static_cast<size_t>(first - plan.skips.begin()));
  }
  for (const auto& w : want.noSkips) {
    for (size_t i = 0; i < plan.skips.size(); ++i) {
      EXPECT_FALSE(isSo(plan.skips[i], w)) << "#" << i << " is a skip the case rules out: " << plan.skips[i].message;
    }
  }
  if (want.skipCount) {
    EXPECT_EQ(plan.skips.size(), *want.skipCount);
  }
}

void expectSatisfied(const core::Plan& plan, const PlanIs& want) {
  if (want.satisfiedCount) {
    EXPECT_EQ(plan.satisfied.size(), *want.satisfiedCount);
  }
  for (const auto& w : want.satisfied) {
    EXPECT_TRUE(
        std::any_of(plan.satisfied.begin(), plan.satisfied.end(), [&](const core::Satisfied& s) { return isSo(s, w); }))
        << "nothing satisfied is " << shown(w.kind) << " " << shown(w.object);
  }
}

void expectSaid(const core::Plan& plan, const app::Status& s, const core::PolicySet& p, const PlanIs& want) {
  if (want.golden != nullptr) expectGolden(want.golden, planJson(plan, p));
  for (const auto& rule : want.unmentioned) EXPECT_FALSE(mentions(plan, rule)) << rule;
  if (!want.textSays.empty()) {
    std::string text = app::planText(plan, s, p, false);
    for (const auto& part : want.textSays) EXPECT_NE(text.find(part), std::string::npos) << part << " in\n" << text;
  }
  if (!want.jsonSays.empty()) {
    std::string json = app::planJson(plan, p);
    for (const auto& part : want.jsonSays) EXPECT_NE(json.find(part), std::string::npos) << part << " in\n" << json;
  }
}

void expectPlan(const PlanCase& c) {
  auto h = c.host();
  auto s = statusOf(*h);
  if (c.given) c.given(s);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const auto policies = c.policy ? rules(*c.policy) : shipped();
  auto plan = planOf(s, policies, c.trigger);
  EXPECT_EQ(plan.trigger, c.trigger);
  expectChanges(plan, c.want);
  expectSkips(plan, c.want);
  expectSatisfied(plan, c.want);
  expectSaid(plan, s, policies, c.want);
}

// A case is shown by its name (gtest would show its bytes).
void PrintTo(const PlanCase& c, std::ostream* os) {  // NOLINT(readability-identifier-naming): gtest's name
  *os << c.name;
}

std::string caseName(const ::testing::TestParamInfo<PlanCase>& i) {
  return i.param.name;
}

// --- Rows alike but for one value ---

// `domain` for the NIC of externalPortGuest, its trade-offs accepted: refused all the same.
PlanCase refusedBehindAnExternalFacingPort(const char* name, const char* domain) {
  return {
      .name = name,
      .host = externalPortGuest,
      .policy = std::string("[[rule]]\nname = \"user\"\ndescription = \"d\"\ndomain = \"") + domain +
                "\"\naccept = [\"no-isolation\", \"lazy-invalidation\"]\n[rule.match]\naddress = \"0000:06:00.0\"\n",
      .trigger = Trigger::Hotplug,
      .want = {.changes = Changes{},
               .skips = {{.reason = SkipReason::Untrusted,
                          .device = "0000:06:00.0",
                          .says = {"is untrusted (removable, below an external-facing port)"}}}}};
}

// The largest rx ring, at hotplug, for the devices of thunderboltNic that `match` selects.
PlanCase rxMaxWhere(const char* name, const char* match, PlanIs want) {
  return {.name = name,
          .host = thunderboltNic,
          .given = atlanticAtDefaults,
          .policy = std::string(R"(
[[rule]]
name = "rx"
description = "rx max"
[rule.match]
)") + match + R"(
[rule.rings]
rx = "max"
)",
          .trigger = Trigger::Hotplug,
          .want = std::move(want)};
}

// The NIC's ring changed once, and the rule not "overridden by itself".
const PlanIs kChangedOnce = {.changes = Changes{{.device = kNic}}, .noSkips = {{.reason = SkipReason::Overridden}}};

// --- The shipped policies, on the hosts they are written for ---

const PlanCase kShippedCases[] = {
    {.name = "ThunderboltNicGetsMaximumRingsAndCoalescingAtHotplug",
     .host = thunderboltNic,
     .given = atlanticAtDefaults,
     .policy = kShippedPolicies,
     .trigger = Trigger::Hotplug,
     .want = {.golden = "golden/plan_thunderbolt_nic_hotplug.json"}},
    // Coalescing does not reset the link: it is applied at start too; rings are not.
    {.name = "ThunderboltNicRingsWaitForHotplugAtStart",
     .host = thunderboltNic,
     .given = atlanticAtDefaults,
     .policy = kShippedPolicies,
     .trigger = Trigger::Coldplug,
     .want = {.golden = "golden/plan_thunderbolt_nic_coldplug.json",
              .has = {{.kind = ChangeKind::Coalesce}},
              .hasNo = {{.kind = ChangeKind::Rings}},
              .skips = {{.reason = SkipReason::HotplugOnly}}}},
    // The kernel treats a NIC below an external-facing port as it treats one in a Thunderbolt
    // enclosure (strict DMA, bounce buffers) even with no Thunderbolt domain in sight: the tests/vm
    // untrusted guest. The shipped rings rule is for every untrusted NIC; the e1000e's values are
    // those ethtool read there.
    {.name = "UntrustedNicBehindAnExternalFacingPortGetsRingsAndCoalescingAtHotplug",
     .host = externalPortGuest,
     .given =
         [](app::Status& s) {
           core::EthtoolState e;
           e.read = true;
           e.rings = {{"rx", 256}, {"tx", 256}};
           e.ringsMax = {{"rx", 4096}, {"tx", 4096}};
           e.coalesce = {{"rx-usecs", 3}};
           setEthtool(s, "0000:06:00.0", e);
           setEthtool(s, "0000:04:00.0", e);
         },
     .policy = kShippedPolicies,
     .trigger = Trigger::Hotplug,
     .want = {.changes =
                  Changes{
                      {.device = "0000:06:00.0", .key = "rx", .to = "4096", .rule = "thunderbolt-nic-rings"},
                      {.device = "0000:06:00.0", .key = "tx", .to = "4096", .rule = "thunderbolt-nic-rings"},
                      {.device = "0000:06:00.0", .key = "rx-usecs", .to = "128", .rule = "thunderbolt-nic-rings"}}}},
    {.name = "TwoNvmeInOneGroupOnAnAffectedKernelAreAdvisedIdentity",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kShippedPolicies,
     .trigger = Trigger::Coldplug,
     .want = {.golden = "golden/plan_two_nvme_one_group.json",
              .changes = Changes{{.to = "identity",
                                  .mode = core::RuleMode::Advise,
                                  .risk = core::Risk::High,
                                  .devices = std::vector<std::string>{kNvme0, kNvme1}}}}},
    {.name = "TwoNvmeInOneGroupOnAFixedKernelNeedNothing",
     .host = [] { return twoNvmeOneGroup("6.12.43-1"); },
     .policy = kShippedPolicies,
     .trigger = Trigger::Coldplug,
     .want = {.changes = Changes{}, .skipCount = 0}},
    {.name = "ArmSmmuNicIsAdvisedLazyAsALiveIrreversibleChange",
     .host = armSmmuV3,
     .policy = kShippedPolicies,
     .trigger = Trigger::Coldplug,
     .want = {.golden = "golden/plan_arm_smmu_v3.json",
              .changes = Changes{{.from = "DMA",
                                  .to = "DMA-FQ",
                                  .risk = core::Risk::Medium,
                                  .disruptive = false,
                                  .irreversible = true}}}},
    {.name = "GuestWithCachingModeIsAdvisedIdentityForItsDevices",
     .host = intelGuestCachingMode,
     .policy = kShippedPolicies,
     .trigger = Trigger::Coldplug,
     .want = {.golden = "golden/plan_intel_guest_caching_mode.json", .every = ChangeIs{.to = "identity"}}},
    {.name = "DefaultOnHostWithLazyNicIsAlreadyAsAdvised",
     .host = intelBareMetal,
     .given = [](app::Status& s) { ASSERT_TRUE(hasFinding(s, "default-on")); },
     .policy = kShippedPolicies,
     .trigger = Trigger::Coldplug,
     .want = {.golden = "golden/plan_intel_bare_metal.json",
              .changes = Changes{},
              .satisfiedCount = 1,
              .satisfied = {{.object = "group 13"}}}},
};

class ShippedPolicy : public ::testing::TestWithParam<PlanCase> {};

TEST_P(ShippedPolicy, Plans) {
  expectPlan(GetParam());
}

INSTANTIATE_TEST_SUITE_P(ShippedPolicies, ShippedPolicy, ::testing::ValuesIn(kShippedCases), caseName);

TEST(ShippedPolicies, AllLoadWithoutDiagnostics) {
  auto loaded = config::loadPolicyFiles({kShipped}, {}, {});
  EXPECT_TRUE(loaded.diagnostics.empty());
  EXPECT_GE(loaded.policies.rules.size(), 5U);
  for (const auto& r : loaded.policies.rules) {
    // Conservative by default: whatever weakens isolation ships as advice.
    if (r.domain == core::DomainRequest::Identity || r.domain == core::DomainRequest::DmaFq) {
      EXPECT_EQ(r.mode, core::RuleMode::Advise) << r.name;
      EXPECT_TRUE(r.accepts.empty()) << r.name;
    }
  }
}

// --- Safety rules no policy overrides, and settings the host cannot take: the refusals ---

// A Thunderbolt NIC that carries traffic.
void atlanticInUse(app::Status& s) {
  atlanticAtDefaults(s);
  auto* nic = s.host.device(kNic);
  ASSERT_NE(nic, nullptr);
  nic->inUse = {{core::InUseReason::Kind::NetRoute, nic->netdevs.front().name + " is up and carries routes"}};
}

const PlanCase kRefusals[] = {
    {.name = "RefusesIdentityForUntrustedDevice",
     .host = thunderboltNic,
     .policy = R"(
[[rule]]
name = "tb-identity"
description = "wrong"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
thunderbolt = true
kind = "nic"
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{}, .skips = {{.reason = SkipReason::Untrusted, .says = {"refuses identity"}}}}},
    {.name = "RefusesLazyInvalidationForUntrustedDevice",
     .host = thunderboltNic,
     .policy = R"(
[[rule]]
name = "tb-lazy"
description = "wrong"
domain = "DMA-FQ"
accept = ["lazy-invalidation"]
[rule.match]
untrusted = true
kind = "nic"
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{}, .skips = {{.reason = SkipReason::Untrusted}}}},
    refusedBehindAnExternalFacingPort("RefusesIdentityForANicBehindAnExternalFacingPort", "identity"),
    refusedBehindAnExternalFacingPort("RefusesLazyInvalidationForANicBehindAnExternalFacingPort", "DMA-FQ"),
    {.name = "RefusesIdentityThatTheRuleDoesNotAccept",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kNvmeIdentityNotAccepted,
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{},
              .skips = {{.reason = SkipReason::NeedsAcceptance, .says = {"accept = [\"no-isolation\"]"}}}}},
    {.name = "HoldsADomainRebindForHotplugAtStart",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kNvmeIdentity,
     .trigger = Trigger::Coldplug,
     .want = {.changes = Changes{}, .skips = {{.reason = SkipReason::HotplugOnly}}}},
    {.name = "HoldsABootRulesRebindAtStartAndNamesBoot",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kBootAndStart,
     .trigger = Trigger::Coldplug,
     .want = {.changes = Changes{},
              .skips = {{.reason = SkipReason::HotplugOnly,
                         .rule = "nvme-boot",
                         .says = {"acts only at boot", "when = \"boot\""}}}}},
    // nvme0 holds / and /boot/efi
    {.name = "RefusesARebindOfADeviceInUse",
     .host = intelBareMetal,
     .policy = R"(
[[rule]]
name = "nvme-identity"
description = "identity for the root disk"
domain = "identity"
accept = ["no-isolation"]
when = "always"
[rule.match]
kind = "nvme"
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{}, .skips = {{.reason = SkipReason::InUse, .says = {"mounted at /"}}}}},
    {.name = "KeepsTheSafetyRulesAtBoot",
     .host = intelBareMetal,
     .policy = R"(
[[rule]]
name = "nvme-boot"
description = "identity at boot"
when = "boot"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
)",
     .trigger = Trigger::Boot,
     .want = {.skips = {{.reason = SkipReason::InUse, .says = {"mounted"}}}}},
    {.name = "NeverUnbindsVfio",
     .host = vfioGroup,
     .policy = R"(
[[rule]]
name = "gpu-dma"
description = "strict for the GPU"
domain = "DMA"
[rule.match]
driver = "vfio-pci"
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{}, .skips = {{.reason = SkipReason::NeverUnbind}}}},
    {.name = "RefusesAGroupHoldingADeviceNoRuleCovers",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = R"(
[[rule]]
name = "nvme0-identity"
description = "only one of the two"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
name = "nvme0"
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{}, .skips = {{.reason = SkipReason::GroupUncovered, .says = {"nvme1"}}}}},
    {.name = "ReportsRulesThatDisagreeOnOneGroup",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = R"(
[[rule]]
name = "a"
description = "identity for nvme0"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
name = "nvme0"

[[rule]]
name = "b"
description = "strict for nvme1"
domain = "DMA"
[rule.match]
name = "nvme1"
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{},
              .skips = {{.reason = SkipReason::Conflict, .says = {"'a' wants identity, 'b' wants DMA"}}}}},
    {.name = "RefusesAMultiDeviceGroupBeforeLinux64",
     .host = [] { return twoNvmeOneGroup("6.1.90-1"); },
     .policy = kNvmeIdentity,
     .trigger = Trigger::Hotplug,
     .want = {.skips = {{.reason = SkipReason::KernelTooOld, .says = {"6.4"}}}}},
    {.name = "RefusesARingBeyondTheMaximum",
     .host = thunderboltNic,
     .given = atlanticAtDefaults,
     .policy = R"(
[[rule]]
name = "big"
description = "too big"
[rule.match]
kind = "nic"
[rule.rings]
rx = 16384
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{}, .skips = {{.reason = SkipReason::Unsupported}}}},
    // The way to do it anyway is named: with the device, as at hotplug.
    {.name = "NeverResetsTheLinkOfANicInUseAtStart",
     .host = thunderboltNic,
     .given = atlanticInUse,
     .policy = kAlwaysRings,
     .trigger = Trigger::Coldplug,
     .want = {.changes = Changes{},
              .skips = {{.reason = SkipReason::InUse,
                         .rule = "always-rings",
                         .says = {"carries routes", "iommuctl apply --hotplug --device enp5s0"}}}}},
};

class PlannerRefuses : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlannerRefuses, AndSaysWhy) {
  expectPlan(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Planner, PlannerRefuses, ::testing::ValuesIn(kRefusals), caseName);

// --- What the planner plans: rules, their order, their matches, their triggers ---

const PlanCase kPlans[] = {
    {.name = "AppliesAcceptedIdentityToAWholeGroupAtHotplug",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kNvmeIdentity,
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{{.ruleLine = 2,
                                  .mode = core::RuleMode::Apply,
                                  .disruptive = true,
                                  .group = 20,
                                  .tradeOffSays = "DMA to all memory"}}}},
    {.name = "LaterRuleWinsAndTheEarlierIsReportedOverridden",
     .host = thunderboltNic,
     .given = atlanticAtDefaults,
     .policy = R"(
[[rule]]
name = "first"
description = "rx 4096"
[rule.match]
kind = "nic"
[rule.rings]
rx = 4096

[[rule]]
name = "second"
description = "rx max"
[rule.match]
driver = "atlantic"
[rule.rings]
rx = "max"
)",
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{{.from = "2048", .to = "8184", .rule = "second"}},
              .skips = {{.reason = SkipReason::Overridden, .rule = "first"}}}},
    // Each rule is tried only on the devices its most selective condition selects; overlapping
    // globs and a device matched through several of them must still count once, whichever index
    // is chosen (and not be "overridden by itself").
    rxMaxWhere("OverlappingAddressGlobsSelectADeviceOnce", R"(address = ["0000:05:*", "0000:0*", "*:00.0"])",
               kChangedOnce),
    rxMaxWhere("OverlappingNameGlobsSelectADeviceOnce", R"(name = ["enp*", "enp5s0", "e*"])", kChangedOnce),
    rxMaxWhere("OverlappingDriverGlobsSelectADeviceOnce", R"(driver = ["atl*", "atlantic"])", kChangedOnce),
    rxMaxWhere("ARepeatedVendorSelectsADeviceOnce", "vendor = [0x1d6a, 0x1d6a]", kChangedOnce),
    rxMaxWhere("ARepeatedKindSelectsADeviceOnce", R"(kind = ["nic", "nic"])", kChangedOnce),
    rxMaxWhere("AGlobWithoutALiteralPrefixStillSelectsByItsPattern", R"(address = "????:0[0-5]:*")",
               {.changes = Changes{{}}}),
    rxMaxWhere("AGlobWithoutALiteralPrefixSelectsNothingOutsideItsPattern", R"(address = "????:0[6-9]:*")",
               {.changes = Changes{}}),
    // A device that has just appeared is the admin's to reset, in use or not; and a NIC carrying
    // no traffic is changed at start, as the rule says (NeverResetsTheLinkOfANicInUseAtStart).
    {.name = "ResetsTheLinkOfANicInUseThatHasJustAppeared",
     .host = thunderboltNic,
     .given = atlanticInUse,
     .policy = kAlwaysRings,
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{{}}}},
    {.name = "ResetsTheLinkOfANicWithoutTrafficAtStartWhenTheRuleSaysAlways",
     .host = thunderboltNic,
     .given = atlanticAtDefaults,
     .policy = kAlwaysRings,
     .trigger = Trigger::Coldplug,
     .want = {.changes = Changes{{}}}},
    {.name = "PlanOfATunedHostIsEmpty",
     .host = thunderboltNic,
     .given =
         [](app::Status& s) {
           auto tuned = atlanticDefaults();
           tuned.rings = {{"rx", 8184}, {"tx", 8184}};
           tuned.coalesce = {{"rx-usecs", 128}, {"rx-frames", 0}, {"tx-usecs", 512}, {"tx-frames", 0}};
           setEthtool(s, kNic, tuned);
         },
     .policy = kShippedPolicies,
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{}, .satisfiedCount = 6}},  // rx, tx, and four coalescing values
    {.name = "UnlessExcludesDevicesGivenToVfio",
     .host = vfioGroup,
     .policy = R"(
[[rule]]
name = "everything-but-vfio"
description = "strict for all but VFIO"
domain = "DMA"
[rule.unless]
driver = "vfio-pci"
)",
     .trigger = Trigger::Hotplug,
     .want = {.hasNo = {{.device = "0000:01:00.0"}}, .noSkips = {{.device = "0000:01:00.0"}}}},
    // aq_itr: writable, changes, read at probe. aq_itr_rx: read-only at runtime. rxpageorder:
    // optional and missing: silent. aq_itr_tx: missing: reported. modprobe.d line: planned.
    {.name = "PlansModuleParametersByWhatSysfsAllows",
     .host = thunderboltNicWithModule,
     .given = [](app::Status& s) { ASSERT_TRUE(s.host.modules.contains("atlantic")); },
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.golden = "golden/plan_module_params.json",
              .has = {{.kind = ChangeKind::ModuleParam, .key = "aq_itr"},
                      {.kind = ChangeKind::ModprobeConf, .key = "aq_itr_rx"}},
              .skips = {{.reason = SkipReason::ParamReadOnly},
                        {.reason = SkipReason::ParamMissing, .key = "aq_itr_tx"}},
              .noSkips = {{.key = "rxpageorder"}}}},
    {.name = "ALoadTimeParameterAlreadyInTheFileIsSatisfied",
     .host =
         [] {
           auto h = thunderboltNicWithModule();
           h->write("/etc/modprobe.d/iommud-atlantic.conf", "options atlantic aq_itr_rx=64\n");
           return h;
         },
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.satisfied = {{.kind = ChangeKind::ModprobeConf}}}},
    {.name = "AtBootPlansOnlyBootRulesAndSaysNothingOfTheOthers",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kBootAndStart,
     .trigger = Trigger::Boot,
     .want = {.changes = Changes{{.to = "identity", .rule = "nvme-boot", .disruptive = true}},
              .unmentioned = {"nvme-hotplug", "itr"}}},
    {.name = "AtBootLeavesOutEveryRuleWithoutWhenBoot",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kNvmeIdentity,
     .trigger = Trigger::Boot,
     .want = {.changes = Changes{}, .skipCount = 0, .satisfiedCount = 0}},
    {.name = "ABootRuleActsAtHotplugToo",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kBootAndStart,
     .trigger = Trigger::Hotplug,
     .want = {.changes = Changes{{.rule = "nvme-boot"}}}},
    {.name = "LetsABootRulesHarmlessSettingActAtStart",
     .host = thunderboltNicWithModule,
     .policy = bootParamRules(),
     .trigger = Trigger::Coldplug,
     .want = {.has = {{.kind = ChangeKind::ModuleParam}, {.kind = ChangeKind::ModprobeConf}}}},
    // At boot the runtime parameter is set, but no modprobe.d file: the initramfs's /etc does not last.
    {.name = "SetsABootRulesRuntimeParameterAtBootButWritesNoModprobeD",
     .host = thunderboltNicWithModule,
     .policy = bootParamRules(),
     .trigger = Trigger::Boot,
     .want = {.has = {{.kind = ChangeKind::ModuleParam}},
              .hasNo = {{.kind = ChangeKind::ModprobeConf}},
              .noSkips = {{.kind = ChangeKind::ModprobeConf}}}},
    {.name = "NamesTheBootTriggerInItsText",
     .host = [] { return twoNvmeOneGroup(); },
     .policy = kBootAndStart,
     .trigger = Trigger::Boot,
     .want = {.textSays = {"at boot"}, .jsonSays = {R"("trigger": "boot")"}}},
};

class PlannerPlans : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlannerPlans, AsTheRowSays) {
  expectPlan(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Planner, PlannerPlans, ::testing::ValuesIn(kPlans), caseName);

TEST(Glob, MatchesLiteralsPrefixesAndPatternsAlike) {
  EXPECT_TRUE(core::Glob("ice").matches("ice"));
  EXPECT_FALSE(core::Glob("ice").matches("ice0"));
  EXPECT_TRUE(core::Glob("enp*").matches("enp"));
  EXPECT_TRUE(core::Glob("enp*").matches("enp5s0"));
  EXPECT_FALSE(core::Glob("enp*").matches("en"));
  EXPECT_TRUE(core::Glob("*v[0-9]").matches("enp5s0v3"));
  EXPECT_FALSE(core::Glob("*v[0-9]").matches("enp5s0v"));
  EXPECT_TRUE(core::Glob("0000:0?:00.*").matches("0000:05:00.1"));
  EXPECT_TRUE(core::Glob("a\\*").matches("a*"));
  EXPECT_FALSE(core::Glob("a\\*").matches("ab"));
  EXPECT_EQ(core::Glob("0000:0[0-5]:*").literalPrefix(), "0000:0");
  EXPECT_EQ(core::Glob("*").literalPrefix(), "");
  EXPECT_EQ(core::Glob("ice").literalPrefix(), "ice");
}

TEST(Planner, SameInputsGiveTheSamePlan) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto p = shipped();
  EXPECT_EQ(planJson(planOf(s, p, Trigger::Hotplug), p), planJson(planOf(s, p, Trigger::Hotplug), p));
}

TEST(Planner, FindingConditionHoldsOnlyForTheDevicesTheFindingNames) {
  auto s = statusOf(*twoNvmeOneGroup());
  ASSERT_TRUE(hasFinding(s, "vtd-iotlb-sync-map"));
  auto p = rules(R"(
[[rule]]
name = "by-finding"
description = "identity where the regression bites"
mode = "advise"
domain = "identity"
[rule.host]
finding = "vtd-iotlb-sync-map"
)");
  auto evalNvme = core::evaluateRules({s.host, s.mode, s.findings}, p, *s.host.device(kNvme0));
  auto evalHostBridge = core::evaluateRules({s.host, s.mode, s.findings}, p, *s.host.device("0000:00:00.0"));
  EXPECT_TRUE(evalNvme[0].matches);
  EXPECT_FALSE(evalHostBridge[0].matches);
}

// --- Load-time parameters and the initramfs ---

const core::Change* modprobeChange(const core::Plan& plan) {
  auto it = std::find_if(plan.changes.begin(), plan.changes.end(),
                         [](const core::Change& c) { return c.kind == ChangeKind::ModprobeConf; });
  return it == plan.changes.end() ? nullptr : &*it;
}
// A pointer into a temporary Plan would dangle: keep the Plan in a variable.
const core::Change* modprobeChange(core::Plan&& plan) = delete;

core::Initramfs debianImage(core::Initramfs::State state, std::set<std::string> modules = {}) {
  core::Initramfs i;
  i.state = state;
  i.image = "/boot/initrd.img-6.12.38+deb12-amd64";
  i.modules = std::move(modules);
  if (state == core::Initramfs::State::Unreadable) i.reason = "Permission denied";
  return i;
}

// The plan of kParamRules at hotplug on a host whose initramfs is `image`.
core::Plan planWithInitramfs(app::Status& s, core::Initramfs image) {
  s.host.kernel.initramfs = std::move(image);
  return planOf(s, rules(kParamRules), Trigger::Hotplug);
}

// The initramfs of the host is `image`.
std::function<void(app::Status&)> initramfsIs(const core::Initramfs& image) {
  return [image](app::Status& s) { s.host.kernel.initramfs = image; };
}

// The Atlantic NIC's module loaded with aq_itr_rx=64, which is read-only at runtime (0444).
std::unique_ptr<FakeHost> atlanticLoadedWithItrRx() {
  auto h = thunderboltNicWithModule();
  const auto param = h->root() / "sys/module/atlantic/parameters/aq_itr_rx";
  std::filesystem::permissions(param, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  h->write("/sys/module/atlantic/parameters/aq_itr_rx", "64\n");
  std::filesystem::permissions(param, std::filesystem::perms::owner_write, std::filesystem::perm_options::remove);
  return h;
}

core::Initramfs fedoraImage() {
  auto fedora = debianImage(core::Initramfs::State::Listed, {"atlantic"});
  fedora.generator = core::Initramfs::Generator::Dracut;
  fedora.image = "/boot/initramfs-6.12.38+deb12-amd64.img";
  return fedora;
}

constexpr const char* kLoadedOnReload = "takes effect when atlantic is next loaded (reload the module or reboot)";

const PlanCase kInitramfsCases[] = {
    // The command stays whole on one line of the text, to be copied.
    {.name = "SaysTheInitramfsMustBeRebuiltWhenItHoldsTheModuleOfAModprobeLine",
     .host = thunderboltNicWithModule,
     .given = initramfsIs(debianImage(core::Initramfs::State::Listed, {"atlantic", "nvme"})),
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.has = {{.kind = ChangeKind::ModprobeConf,
                       .note = "takes effect when atlantic is next loaded (reload the module); atlantic is in the "
                               "initramfs /boot/initrd.img-6.12.38+deb12-amd64: until `update-initramfs -u -k "
                               "6.12.38+deb12-amd64` rebuilds it, boots load atlantic without aq_itr_rx=64",
                       .rebuild = true,
                       .rebuildImage = "/boot/initrd.img-6.12.38+deb12-amd64",
                       .rebuildCommand = "update-initramfs -u -k 6.12.38+deb12-amd64",
                       .rebuildChecked = true}},
              .textSays = {"`update-initramfs -u -k 6.12.38+deb12-amd64`"},
              .jsonSays = {R"("rebuild": "update-initramfs -u -k 6.12.38+deb12-amd64",)", R"("holds_module": true)"}}},
    {.name = "SaysAValueInEffectNowStillNeedsTheInitramfsRebuiltForBoot",
     .host = atlanticLoadedWithItrRx,
     .given = initramfsIs(fedoraImage()),
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.has = {{.kind = ChangeKind::ModprobeConf,
                       .note = "already in effect now; atlantic is in the initramfs "
                               "/boot/initramfs-6.12.38+deb12-amd64.img: until `dracut -f --kver 6.12.38+deb12-amd64` "
                               "rebuilds it, boots load atlantic without aq_itr_rx=64"}}}},
    {.name = "SaysAnInitramfsThatCouldNotBeListedWasNotChecked",
     .host = thunderboltNicWithModule,
     .given = initramfsIs(debianImage(core::Initramfs::State::Unreadable)),
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.has = {{.kind = ChangeKind::ModprobeConf,
                       .note = "takes effect when atlantic is next loaded (reload the module); the initramfs "
                               "/boot/initrd.img-6.12.38+deb12-amd64 could not be checked for atlantic (Permission "
                               "denied): if it holds atlantic, boots load it without aq_itr_rx=64 until "
                               "`update-initramfs -u -k 6.12.38+deb12-amd64` rebuilds it",
                       .rebuild = true,
                       .rebuildChecked = false}},
              .jsonSays = {R"("holds_module": null)"}}},
    {.name = "SaysNothingOfAnInitramfsWithoutTheModule",
     .host = thunderboltNicWithModule,
     .given = initramfsIs(debianImage(core::Initramfs::State::Listed, {"nvme"})),
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.has = {{.kind = ChangeKind::ModprobeConf, .note = kLoadedOnReload, .rebuild = false}}}},
    {.name = "SaysNothingOfAnInitramfsThatIsAbsent",
     .host = thunderboltNicWithModule,
     .given = initramfsIs(debianImage(core::Initramfs::State::Absent)),
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.has = {{.kind = ChangeKind::ModprobeConf, .note = kLoadedOnReload, .rebuild = false}}}},
    {.name = "SaysNothingOfAnInitramfsNotRead",
     .host = thunderboltNicWithModule,
     .given = initramfsIs(core::Initramfs{}),
     .policy = kParamRules,
     .trigger = Trigger::Hotplug,
     .want = {.has = {{.kind = ChangeKind::ModprobeConf, .note = kLoadedOnReload, .rebuild = false}}}},
};

class PlannerInitramfs : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlannerInitramfs, AsTheRowSays) {
  expectPlan(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Planner, PlannerInitramfs, ::testing::ValuesIn(kInitramfsCases), caseName);

TEST(Planner, ListsTheInitramfsOnlyWhenThePlanWritesModprobeD) {
  auto h = thunderboltNicWithModule();
  // Not an image: listing it fails, which shows that it was tried.
  h->write("/boot/initrd.img-6.12.38+deb12-amd64", "not a cpio archive\n");
  auto s = statusOf(*h);
  const adapters::sysfs::Root root(h->rootString());
  auto identity = planOf(s, rules(kNvmeIdentity), Trigger::Hotplug);
  app::listInitramfsFor(root, identity, s);
  EXPECT_EQ(s.host.kernel.initramfs.state, core::Initramfs::State::NotRead);

  auto plan = planOf(s, rules(kParamRules), Trigger::Hotplug);
  app::listInitramfsFor(root, plan, s);
  EXPECT_EQ(s.host.kernel.initramfs.state, core::Initramfs::State::Unreadable);
  EXPECT_EQ(s.host.kernel.initramfs.image, "/boot/initrd.img-6.12.38+deb12-amd64");
  const auto* c = modprobeChange(plan);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->note.find("could not be checked for atlantic"), std::string::npos) << c->note;

  // The line is in the file already: nothing to write, nothing to list.
  h->write("/etc/modprobe.d/iommud-atlantic.conf", "options atlantic aq_itr_rx=64\n");
  auto tuned = statusOf(*h);
  auto nothing = planOf(tuned, rules(kParamRules), Trigger::Hotplug);
  app::listInitramfsFor(root, nothing, tuned);
  EXPECT_EQ(tuned.host.kernel.initramfs.state, core::Initramfs::State::NotRead);
}

TEST(Planner, FindsNoInitramfsUnderARootWithoutOne) {
  auto h = thunderboltNicWithModule();
  auto s = statusOf(*h);
  auto plan = planOf(s, rules(kParamRules), Trigger::Hotplug);
  app::listInitramfsFor(adapters::sysfs::Root(h->rootString()), plan, s);
  EXPECT_EQ(s.host.kernel.initramfs.state, core::Initramfs::State::Absent);
}

// A plan made before the initramfs was listed, told of it afterwards (app::listInitramfsFor),
// says what a plan made with it says: the host is planned once, not on trial and again.
TEST(Planner, AnInitramfsListedAfterThePlanIsSaidAsAPlanWithItWouldSayIt) {
  auto h = thunderboltNicWithModule();
  for (const auto& image :
       {debianImage(core::Initramfs::State::Listed, {"atlantic", "nvme"}),
        debianImage(core::Initramfs::State::Unreadable), debianImage(core::Initramfs::State::Listed, {"nvme"}),
        debianImage(core::Initramfs::State::Absent)}) {
    auto with = statusOf(*h);
    auto expected = planWithInitramfs(with, image);
    auto later = statusOf(*h);
    auto plan = planOf(later, rules(kParamRules), Trigger::Hotplug);
    later.host.kernel.initramfs = image;
    core::noteInitramfs(plan, later.host);
    const auto* want = modprobeChange(expected);
    const auto* got = modprobeChange(plan);
    ASSERT_NE(want, nullptr);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->note, want->note);
    EXPECT_EQ(got->initramfs.has_value(), want->initramfs.has_value());
    if (got->initramfs && want->initramfs) {
      EXPECT_EQ(got->initramfs->image, want->initramfs->image);
      EXPECT_EQ(got->initramfs->command, want->initramfs->command);
      EXPECT_EQ(got->initramfs->checked, want->initramfs->checked);
    }
  }
}

// --- explain ---

TEST(Explain, ListsEveryConditionOfAMatchingAndANearlyMatchingRule) {
  auto s = statusOf(*twoNvmeOneGroup("6.12.43-1"));
  auto p = shipped();
  const auto* d = s.host.device(kNvme0);
  auto evaluations = core::evaluateRules({s.host, s.mode, s.findings}, p, *d);
  auto plan = planOf(s, p, Trigger::Coldplug, kNvme0);
  std::string text = app::explainText(*d, s, p, evaluations, plan, false);
  // The regression rule fails only on the kernel version: "nearly".
  // The verdict stands beside the name, whatever the length of the path (a line of its own).
  EXPECT_NE(text.find("  nvme-shared-group-vtd-regression nearly matches, mode advise\n"), std::string::npos) << text;
  EXPECT_NE(text.find("6.12.43"), std::string::npos) << text;
}

TEST(Explain, ARuleForOtherIommuHardwareIsNotNearAndUnlessReadsAsTheRule) {
  // Bare-metal VT-d: the vIOMMU rules fail only on host.caching-mode / host.np-cache, which no one
  // can change on this host: not "nearly". Their [[rule.unless]] rows show the device's values.
  // The JSON's "nearly" is what the text prints as "nearly matches".
  auto nearRules = [](const std::string& json) {
    std::vector<std::string> out;
    const auto doc = nlohmann::json::parse(json);  // held: a range-for does not keep a temporary's member alive
    for (const auto& r : doc["rules"]) {
      if (r["nearly"].get<bool>()) out.push_back(r["name"].get<std::string>());
    }
    return out;
  };
  auto s = statusOf(*twoNvmeOneGroup("6.12.43-1"));
  auto p = shipped();
  const auto* d = s.host.device(kNvme0);
  auto evaluations = core::evaluateRules({s.host, s.mode, s.findings}, p, *d);
  auto plan = planOf(s, p, Trigger::Coldplug, kNvme0);
  for (const auto& name : nearRules(app::explainJson(*d, s, evaluations, plan))) {
    EXPECT_NE(name, "guest-vtd-caching-mode-identity");
    EXPECT_NE(name, "guest-amd-npcache-identity");
  }
  const auto guest = std::find_if(evaluations.begin(), evaluations.end(), [](const core::RuleEvaluation& e) {
    return e.rule->name == "guest-vtd-caching-mode-identity";
  });
  ASSERT_NE(guest, evaluations.end());
  const auto unless = std::find_if(guest->conditions.begin(), guest->conditions.end(),
                                   [](const core::ConditionResult& c) { return c.condition.starts_with("unless "); });
  ASSERT_NE(unless, guest->conditions.end());
  EXPECT_EQ(unless->condition, "unless driver = \"vfio-pci\"");
  EXPECT_EQ(unless->actual, "nvme");
  EXPECT_TRUE(unless->holds);

  // Without an IOMMU, no rule is near: not the vIOMMU ones, not the untrusted NIC's on a fixed NIC.
  auto none = statusOf(*noIommu());
  ASSERT_FALSE(none.host.devices.empty());
  for (const auto& dev : none.host.devices) {
    auto e = core::evaluateRules({none.host, none.mode, none.findings}, p, dev);
    EXPECT_EQ(nearRules(app::explainJson(dev, none, e, planOf(none, p, Trigger::Coldplug, dev.address))),
              std::vector<std::string>{})
        << dev.address;
  }
}

}  // namespace planner_test
