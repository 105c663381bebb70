#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
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

const core::Skip* skipFor(const core::Plan& p, SkipReason reason) {
  auto it = std::find_if(p.skips.begin(), p.skips.end(), [&](const core::Skip& s) { return s.reason == reason; });
  return it == p.skips.end() ? nullptr : &*it;
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

// Identity for every NVMe drive, with the trade-off accepted.
constexpr const char* kAcceptedNvmeIdentity = R"(
[[rule]]
name = "nvme-identity"
description = "identity, accepted"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
)";

constexpr const char* kNic = "0000:05:00.0";    // the Thunderbolt AQC100
constexpr const char* kNvme0 = "0000:03:00.0";  // twoNvmeOneGroup
constexpr const char* kNvme1 = "0000:04:00.0";

// --- Golden plans of the shipped policies, one per case they are written for ---

TEST(ShippedPolicies, ThunderboltNicGetsMaximumRingsAndCoalescingAtHotplug) {
  auto s = statusOf(*thunderboltNic());
  setEthtool(s, kNic, atlanticDefaults());
  auto p = shipped();
  expectGolden("golden/plan_thunderbolt_nic_hotplug.json", planJson(planOf(s, p, Trigger::Hotplug), p));
}

TEST(ShippedPolicies, ThunderboltNicRingsWaitForHotplugAtStart) {
  auto s = statusOf(*thunderboltNic());
  setEthtool(s, kNic, atlanticDefaults());
  auto p = shipped();
  auto plan = planOf(s, p, Trigger::Coldplug);
  expectGolden("golden/plan_thunderbolt_nic_coldplug.json", planJson(plan, p));
  // Coalescing does not reset the link: it is applied at start too; rings are not.
  EXPECT_TRUE(std::any_of(plan.changes.begin(), plan.changes.end(),
                          [](const core::Change& c) { return c.kind == ChangeKind::Coalesce; }));
  EXPECT_TRUE(std::none_of(plan.changes.begin(), plan.changes.end(),
                           [](const core::Change& c) { return c.kind == ChangeKind::Rings; }));
  EXPECT_NE(skipFor(plan, SkipReason::HotplugOnly), nullptr);
}

// The kernel treats a NIC below an external-facing port as it treats one in a Thunderbolt
// enclosure (strict DMA, bounce buffers) even with no Thunderbolt domain in sight: the tests/vm
// untrusted guest. The shipped rings rule is for every untrusted NIC; the e1000e's values are
// those ethtool read there.
TEST(ShippedPolicies, UntrustedNicBehindAnExternalFacingPortGetsRingsAndCoalescingAtHotplug) {
  auto s = statusOf(*externalPortGuest());
  core::EthtoolState e;
  e.read = true;
  e.rings = {{"rx", 256}, {"tx", 256}};
  e.ringsMax = {{"rx", 4096}, {"tx", 4096}};
  e.coalesce = {{"rx-usecs", 3}};
  setEthtool(s, "0000:06:00.0", e);
  setEthtool(s, "0000:04:00.0", e);
  auto p = shipped();
  auto plan = planOf(s, p, Trigger::Hotplug);
  std::vector<std::string> got;
  for (const auto& c : plan.changes) got.push_back(c.device + " " + c.key + " " + c.to + " " + c.rule.name);
  EXPECT_EQ(got, (std::vector<std::string>{"0000:06:00.0 rx 4096 thunderbolt-nic-rings",
                                           "0000:06:00.0 tx 4096 thunderbolt-nic-rings",
                                           "0000:06:00.0 rx-usecs 128 thunderbolt-nic-rings"}));
}

TEST(Planner, RefusesIdentityAndLazyForANicBehindAnExternalFacingPort) {
  auto s = statusOf(*externalPortGuest());
  for (const char* domain : {"identity", "DMA-FQ"}) {
    auto p =
        rules(std::string("[[rule]]\nname = \"user\"\ndescription = \"d\"\ndomain = \"") + domain +
              "\"\naccept = [\"no-isolation\", \"lazy-invalidation\"]\n[rule.match]\naddress = \"0000:06:00.0\"\n");
    auto plan = planOf(s, p, Trigger::Hotplug);
    EXPECT_TRUE(plan.changes.empty()) << domain;
    const auto* skip = skipFor(plan, SkipReason::Untrusted);
    ASSERT_NE(skip, nullptr) << domain;
    EXPECT_EQ(skip->device, "0000:06:00.0");
    EXPECT_NE(skip->message.find("is untrusted (removable, below an external-facing port)"), std::string::npos)
        << skip->message;
  }
}

TEST(ShippedPolicies, TwoNvmeInOneGroupOnAnAffectedKernelAreAdvisedIdentity) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto p = shipped();
  auto plan = planOf(s, p);
  expectGolden("golden/plan_two_nvme_one_group.json", planJson(plan, p));
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].mode, core::RuleMode::Advise);
  EXPECT_EQ(plan.changes[0].to, "identity");
  EXPECT_EQ(plan.changes[0].risk, core::Risk::High);
  EXPECT_EQ(plan.changes[0].devices, (std::vector<std::string>{kNvme0, kNvme1}));
}

TEST(ShippedPolicies, TwoNvmeInOneGroupOnAFixedKernelNeedNothing) {
  auto s = statusOf(*twoNvmeOneGroup("6.12.43-1"));
  auto plan = planOf(s, shipped());
  EXPECT_TRUE(plan.changes.empty());
  EXPECT_TRUE(plan.skips.empty());
}

TEST(ShippedPolicies, ArmSmmuNicIsAdvisedLazyAsALiveIrreversibleChange) {
  auto s = statusOf(*armSmmuV3());
  auto p = shipped();
  auto plan = planOf(s, p);
  expectGolden("golden/plan_arm_smmu_v3.json", planJson(plan, p));
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].from, "DMA");
  EXPECT_EQ(plan.changes[0].to, "DMA-FQ");
  EXPECT_TRUE(plan.changes[0].irreversible);
  EXPECT_FALSE(plan.changes[0].disruptive);
  EXPECT_EQ(plan.changes[0].risk, core::Risk::Medium);
}

TEST(ShippedPolicies, GuestWithCachingModeIsAdvisedIdentityForItsDevices) {
  auto s = statusOf(*intelGuestCachingMode());
  auto p = shipped();
  auto plan = planOf(s, p);
  expectGolden("golden/plan_intel_guest_caching_mode.json", planJson(plan, p));
  EXPECT_FALSE(plan.changes.empty());
  for (const auto& c : plan.changes) EXPECT_EQ(c.to, "identity") << c.object;
}

TEST(ShippedPolicies, DefaultOnHostWithLazyNicIsAlreadyAsAdvised) {
  auto s = statusOf(*intelBareMetal());
  ASSERT_TRUE(hasFinding(s, "default-on"));
  auto p = shipped();
  auto plan = planOf(s, p);
  expectGolden("golden/plan_intel_bare_metal.json", planJson(plan, p));
  EXPECT_TRUE(plan.changes.empty());
  ASSERT_EQ(plan.satisfied.size(), 1U);
  EXPECT_EQ(plan.satisfied[0].object, "group 13");
}

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

// --- Safety rules no policy overrides: refusals of a domain change, a table of host, policy and
// trigger, each case named as a test is ---

struct RefusalCase {
  const char* name;  // the test's name, a sentence as ever
  std::function<std::unique_ptr<FakeHost>()> host;
  const char* policy;  // TOML
  Trigger trigger;
  SkipReason reason;
  const char* says;  // a part of the skip's message; nullptr: the reason is all
  bool nothingElse;  // and the plan changes nothing
};

const RefusalCase kRefusals[] = {
    {"RefusesIdentityForUntrustedDevice", [] { return thunderboltNic(); }, R"(
[[rule]]
name = "tb-identity"
description = "wrong"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
thunderbolt = true
kind = "nic"
)",
     Trigger::Hotplug, SkipReason::Untrusted, "refuses identity", true},
    {"RefusesLazyInvalidationForUntrustedDevice", [] { return thunderboltNic(); }, R"(
[[rule]]
name = "tb-lazy"
description = "wrong"
domain = "DMA-FQ"
accept = ["lazy-invalidation"]
[rule.match]
untrusted = true
kind = "nic"
)",
     Trigger::Hotplug, SkipReason::Untrusted, nullptr, true},
    {"RefusesIdentityThatTheRuleDoesNotAccept", [] { return twoNvmeOneGroup(); }, R"(
[[rule]]
name = "nvme-identity"
description = "identity without accepting it"
domain = "identity"
[rule.match]
kind = "nvme"
)",
     Trigger::Hotplug, SkipReason::NeedsAcceptance, "accept = [\"no-isolation\"]", true},
    {"HoldsADomainRebindForHotplugAtStart", [] { return twoNvmeOneGroup(); }, kAcceptedNvmeIdentity, Trigger::Coldplug,
     SkipReason::HotplugOnly, nullptr, true},
    // nvme0 holds / and /boot/efi
    {"RefusesARebindOfADeviceInUse", [] { return intelBareMetal(); }, R"(
[[rule]]
name = "nvme-identity"
description = "identity for the root disk"
domain = "identity"
accept = ["no-isolation"]
when = "always"
[rule.match]
kind = "nvme"
)",
     Trigger::Hotplug, SkipReason::InUse, "mounted at /", true},
    {"NeverUnbindsVfio", [] { return vfioGroup(); }, R"(
[[rule]]
name = "gpu-dma"
description = "strict for the GPU"
domain = "DMA"
[rule.match]
driver = "vfio-pci"
)",
     Trigger::Hotplug, SkipReason::NeverUnbind, nullptr, true},
    {"RefusesAGroupHoldingADeviceNoRuleCovers", [] { return twoNvmeOneGroup(); }, R"(
[[rule]]
name = "nvme0-identity"
description = "only one of the two"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
name = "nvme0"
)",
     Trigger::Hotplug, SkipReason::GroupUncovered, "nvme1", true},
    {"ReportsRulesThatDisagreeOnOneGroup", [] { return twoNvmeOneGroup(); }, R"(
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
     Trigger::Hotplug, SkipReason::Conflict, "'a' wants identity, 'b' wants DMA", true},
    {"RefusesAMultiDeviceGroupBeforeLinux64", [] { return twoNvmeOneGroup("6.1.90-1"); }, kAcceptedNvmeIdentity,
     Trigger::Hotplug, SkipReason::KernelTooOld, "6.4", false},
};

class PlannerRefuses : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(PlannerRefuses, TheDomainChangeAndSaysWhy) {
  const RefusalCase& c = GetParam();
  auto h = c.host();
  auto s = statusOf(*h);
  auto plan = planOf(s, rules(c.policy), c.trigger);
  if (c.nothingElse) {
    EXPECT_TRUE(plan.changes.empty());
  }
  const auto* skip = skipFor(plan, c.reason);
  ASSERT_NE(skip, nullptr) << toString(c.reason);
  if (c.says != nullptr) {
    EXPECT_NE(skip->message.find(c.says), std::string::npos) << skip->message;
  }
}

INSTANTIATE_TEST_SUITE_P(Planner, PlannerRefuses, ::testing::ValuesIn(kRefusals),
                         [](const ::testing::TestParamInfo<RefusalCase>& i) { return std::string(i.param.name); });

TEST(Planner, AppliesAcceptedIdentityToAWholeGroupAtHotplug) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto plan = planOf(s, rules(kAcceptedNvmeIdentity), Trigger::Hotplug);
  ASSERT_EQ(plan.changes.size(), 1U);
  const auto& c = plan.changes[0];
  EXPECT_EQ(c.mode, core::RuleMode::Apply);
  EXPECT_EQ(c.group, 20);
  EXPECT_TRUE(c.disruptive);
  EXPECT_NE(c.tradeOff.find("DMA to all memory"), std::string::npos) << c.tradeOff;
  EXPECT_EQ(c.rule.where.line, 2);
}

TEST(Planner, LaterRuleWinsAndTheEarlierIsReportedOverridden) {
  auto s = statusOf(*thunderboltNic());
  setEthtool(s, kNic, atlanticDefaults());
  auto plan = planOf(s, rules(R"(
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
)"),
                     Trigger::Hotplug);
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].rule.name, "second");
  EXPECT_EQ(plan.changes[0].from, "2048");
  EXPECT_EQ(plan.changes[0].to, "8184");
  const auto* skip = skipFor(plan, SkipReason::Overridden);
  ASSERT_NE(skip, nullptr);
  EXPECT_EQ(skip->rule.name, "first");
}

// Each rule is tried only on the devices its most selective condition selects; overlapping globs
// and a device matched through several of them must still count once, whichever index is chosen.
TEST(Planner, OverlappingGlobsSelectADeviceOnce) {
  for (const char* match :
       {R"(address = ["0000:05:*", "0000:0*", "*:00.0"])", R"(name = ["enp*", "enp5s0", "e*"])",
        R"(driver = ["atl*", "atlantic"])", "vendor = [0x1d6a, 0x1d6a]", R"(kind = ["nic", "nic"])"}) {
    SCOPED_TRACE(match);
    auto s = statusOf(*thunderboltNic());
    setEthtool(s, kNic, atlanticDefaults());
    auto plan = planOf(s, rules(std::string(R"(
[[rule]]
name = "rx"
description = "rx max"
[rule.match]
)") + match + R"(
[rule.rings]
rx = "max"
)"),
                       Trigger::Hotplug);
    ASSERT_EQ(plan.changes.size(), 1U);
    EXPECT_EQ(plan.changes[0].device, kNic);
    EXPECT_EQ(skipFor(plan, SkipReason::Overridden), nullptr);  // not "overridden by itself"
  }
}

TEST(Planner, AGlobWithoutALiteralPrefixStillSelectsByItsPattern) {
  auto s = statusOf(*thunderboltNic());
  setEthtool(s, kNic, atlanticDefaults());
  auto misses = planOf(s, rules(R"(
[[rule]]
name = "rx"
description = "rx max"
[rule.match]
address = "????:0[6-9]:*"
[rule.rings]
rx = "max"
)"),
                       Trigger::Hotplug);
  EXPECT_TRUE(misses.changes.empty());
  auto hits = planOf(s, rules(R"(
[[rule]]
name = "rx"
description = "rx max"
[rule.match]
address = "????:0[0-5]:*"
[rule.rings]
rx = "max"
)"),
                     Trigger::Hotplug);
  EXPECT_EQ(hits.changes.size(), 1U);
}

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

TEST(Planner, RefusesARingBeyondTheMaximum) {
  auto s = statusOf(*thunderboltNic());
  setEthtool(s, kNic, atlanticDefaults());
  auto plan = planOf(s, rules(R"(
[[rule]]
name = "big"
description = "too big"
[rule.match]
kind = "nic"
[rule.rings]
rx = 16384
)"),
                     Trigger::Hotplug);
  EXPECT_TRUE(plan.changes.empty());
  EXPECT_NE(skipFor(plan, SkipReason::Unsupported), nullptr);
}

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

TEST(Planner, NeverResetsTheLinkOfANicInUseAtStart) {
  auto s = statusOf(*thunderboltNic());
  setEthtool(s, kNic, atlanticDefaults());
  auto* nic = s.host.device(kNic);
  ASSERT_NE(nic, nullptr);
  const std::string name = nic->netdevs.front().name;
  nic->inUse = {{core::InUseReason::Kind::NetRoute, name + " is up and carries routes"}};
  auto start = planOf(s, rules(kAlwaysRings), Trigger::Coldplug);
  EXPECT_TRUE(start.changes.empty());
  const auto* skip = skipFor(start, SkipReason::InUse);
  ASSERT_NE(skip, nullptr);
  EXPECT_EQ(skip->rule.name, "always-rings");
  EXPECT_NE(skip->message.find("carries routes"), std::string::npos) << skip->message;
  EXPECT_NE(skip->message.find("iommuctl apply --hotplug --device " + name), std::string::npos) << skip->message;
  // A device that has just appeared is the admin's to reset, in use or not; and a NIC carrying no
  // traffic is changed at start, as the rule says.
  EXPECT_EQ(planOf(s, rules(kAlwaysRings), Trigger::Hotplug).changes.size(), 1U);
  nic->inUse.clear();
  EXPECT_EQ(planOf(s, rules(kAlwaysRings), Trigger::Coldplug).changes.size(), 1U);
}

TEST(Planner, PlanOfATunedHostIsEmpty) {
  auto s = statusOf(*thunderboltNic());
  auto tuned = atlanticDefaults();
  tuned.rings = {{"rx", 8184}, {"tx", 8184}};
  tuned.coalesce = {{"rx-usecs", 128}, {"rx-frames", 0}, {"tx-usecs", 512}, {"tx-frames", 0}};
  setEthtool(s, kNic, tuned);
  auto plan = planOf(s, shipped(), Trigger::Hotplug);
  EXPECT_TRUE(plan.changes.empty());
  EXPECT_EQ(plan.satisfied.size(), 6U);  // rx, tx, and four coalescing values
}

TEST(Planner, SameInputsGiveTheSamePlan) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto p = shipped();
  EXPECT_EQ(planJson(planOf(s, p, Trigger::Hotplug), p), planJson(planOf(s, p, Trigger::Hotplug), p));
}

TEST(Planner, UnlessExcludesDevicesGivenToVfio) {
  auto s = statusOf(*vfioGroup());
  auto p = rules(R"(
[[rule]]
name = "everything-but-vfio"
description = "strict for all but VFIO"
domain = "DMA"
[rule.unless]
driver = "vfio-pci"
)");
  auto plan = planOf(s, p, Trigger::Hotplug);
  for (const auto& c : plan.changes) EXPECT_NE(c.device, "0000:01:00.0");
  for (const auto& sk : plan.skips) EXPECT_NE(sk.device, "0000:01:00.0");
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

// --- Module parameters ---

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

TEST(Planner, PlansModuleParametersByWhatSysfsAllows) {
  auto h = thunderboltNicWithModule();
  auto s = statusOf(*h);
  ASSERT_TRUE(s.host.modules.contains("atlantic"));
  auto plan = planOf(s, rules(kParamRules), Trigger::Hotplug);
  expectGolden("golden/plan_module_params.json", planJson(plan, rules(kParamRules)));
  // aq_itr: writable, changes, read at probe. aq_itr_rx: read-only at runtime. rxpageorder:
  // optional and missing: silent. aq_itr_tx: missing: reported. modprobe.d line: planned.
  auto has = [&](ChangeKind k, const std::string& key) {
    return std::any_of(plan.changes.begin(), plan.changes.end(),
                       [&](const core::Change& c) { return c.kind == k && c.key == key; });
  };
  EXPECT_TRUE(has(ChangeKind::ModuleParam, "aq_itr"));
  EXPECT_TRUE(has(ChangeKind::ModprobeConf, "aq_itr_rx"));
  EXPECT_NE(skipFor(plan, SkipReason::ParamReadOnly), nullptr);
  const auto* missing = skipFor(plan, SkipReason::ParamMissing);
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->key, "aq_itr_tx");
  EXPECT_EQ(
      std::count_if(plan.skips.begin(), plan.skips.end(), [](const core::Skip& sk) { return sk.key == "rxpageorder"; }),
      0);
}

TEST(Planner, ALoadTimeParameterAlreadyInTheFileIsSatisfied) {
  auto h = thunderboltNicWithModule();
  h->write("/etc/modprobe.d/iommud-atlantic.conf", "options atlantic aq_itr_rx=64\n");
  auto s = statusOf(*h);
  auto plan = planOf(s, rules(kParamRules), Trigger::Hotplug);
  EXPECT_TRUE(std::any_of(plan.satisfied.begin(), plan.satisfied.end(),
                          [](const core::Satisfied& x) { return x.kind == ChangeKind::ModprobeConf; }));
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

TEST(Planner, SaysTheInitramfsMustBeRebuiltWhenItHoldsTheModuleOfAModprobeLine) {
  auto h = thunderboltNicWithModule();
  auto s = statusOf(*h);
  auto plan = planWithInitramfs(s, debianImage(core::Initramfs::State::Listed, {"atlantic", "nvme"}));
  const auto* c = modprobeChange(plan);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->note,
            "takes effect when atlantic is next loaded (reload the module); atlantic is in the initramfs "
            "/boot/initrd.img-6.12.38+deb12-amd64: until `update-initramfs -u -k 6.12.38+deb12-amd64` rebuilds it, "
            "boots load atlantic without aq_itr_rx=64");
  ASSERT_TRUE(c->initramfs);
  EXPECT_EQ(c->initramfs->image, "/boot/initrd.img-6.12.38+deb12-amd64");
  EXPECT_EQ(c->initramfs->command, "update-initramfs -u -k 6.12.38+deb12-amd64");
  EXPECT_TRUE(c->initramfs->checked);
  std::string json = app::planJson(plan, rules(kParamRules));
  EXPECT_NE(json.find(R"("rebuild": "update-initramfs -u -k 6.12.38+deb12-amd64",)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("holds_module": true)"), std::string::npos) << json;
  std::string text = app::planText(plan, s, rules(kParamRules), false);
  // The command stays whole on one line, to be copied.
  EXPECT_NE(text.find("`update-initramfs -u -k 6.12.38+deb12-amd64`"), std::string::npos) << text;
}

TEST(Planner, SaysAValueInEffectNowStillNeedsTheInitramfsRebuiltForBoot) {
  auto h = thunderboltNicWithModule();
  // aq_itr_rx is read-only at runtime (0444); loaded with aq_itr_rx=64, the module shows 64.
  const auto param = h->root() / "sys/module/atlantic/parameters/aq_itr_rx";
  std::filesystem::permissions(param, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  h->write("/sys/module/atlantic/parameters/aq_itr_rx", "64\n");
  std::filesystem::permissions(param, std::filesystem::perms::owner_write, std::filesystem::perm_options::remove);
  auto s = statusOf(*h);
  auto fedora = debianImage(core::Initramfs::State::Listed, {"atlantic"});
  fedora.generator = core::Initramfs::Generator::Dracut;
  fedora.image = "/boot/initramfs-6.12.38+deb12-amd64.img";
  auto plan = planWithInitramfs(s, fedora);
  const auto* c = modprobeChange(plan);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->note,
            "already in effect now; atlantic is in the initramfs /boot/initramfs-6.12.38+deb12-amd64.img: until "
            "`dracut -f --kver 6.12.38+deb12-amd64` rebuilds it, boots load atlantic without aq_itr_rx=64");
}

TEST(Planner, SaysAnInitramfsThatCouldNotBeListedWasNotChecked) {
  auto s = statusOf(*thunderboltNicWithModule());
  auto plan = planWithInitramfs(s, debianImage(core::Initramfs::State::Unreadable));
  const auto* c = modprobeChange(plan);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->note,
            "takes effect when atlantic is next loaded (reload the module); the initramfs "
            "/boot/initrd.img-6.12.38+deb12-amd64 could not be checked for atlantic (Permission denied): if it holds "
            "atlantic, boots load it without aq_itr_rx=64 until `update-initramfs -u -k 6.12.38+deb12-amd64` rebuilds "
            "it");
  ASSERT_TRUE(c->initramfs);
  EXPECT_FALSE(c->initramfs->checked);
  std::string json = app::planJson(plan, rules(kParamRules));
  EXPECT_NE(json.find(R"("holds_module": null)"), std::string::npos) << json;
}

TEST(Planner, SaysNothingOfAnInitramfsWithoutTheModuleOrWithoutAnImage) {
  auto s = statusOf(*thunderboltNicWithModule());
  for (const auto& image : {debianImage(core::Initramfs::State::Listed, {"nvme"}),
                            debianImage(core::Initramfs::State::Absent), core::Initramfs{}}) {
    auto plan = planWithInitramfs(s, image);
    const auto* c = modprobeChange(plan);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->note, "takes effect when atlantic is next loaded (reload the module or reboot)");
    EXPECT_FALSE(c->initramfs);
  }
}

TEST(Planner, ListsTheInitramfsOnlyWhenThePlanWritesModprobeD) {
  auto h = thunderboltNicWithModule();
  // Not an image: listing it fails, which shows that it was tried.
  h->write("/boot/initrd.img-6.12.38+deb12-amd64", "not a cpio archive\n");
  auto s = statusOf(*h);
  const adapters::sysfs::Root root(h->rootString());
  auto identity = planOf(s, rules(kAcceptedNvmeIdentity), Trigger::Hotplug);
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

bool mentions(const core::Plan& p, const std::string& rule) {
  auto named = [&](const auto& x) { return x.rule.name == rule; };
  return std::any_of(p.changes.begin(), p.changes.end(), named) || std::any_of(p.skips.begin(), p.skips.end(), named) ||
         std::any_of(p.satisfied.begin(), p.satisfied.end(), named);
}

TEST(Planner, AtBootPlansOnlyBootRulesAndSaysNothingOfTheOthers) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto plan = planOf(s, rules(kBootAndStart), Trigger::Boot);
  EXPECT_EQ(plan.trigger, Trigger::Boot);
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].rule.name, "nvme-boot");
  EXPECT_EQ(plan.changes[0].to, "identity");
  EXPECT_TRUE(plan.changes[0].disruptive);
  EXPECT_FALSE(mentions(plan, "nvme-hotplug"));
  EXPECT_FALSE(mentions(plan, "itr"));
}

TEST(Planner, AtBootLeavesOutEveryRuleWithoutWhenBoot) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto plan = planOf(s, rules(kAcceptedNvmeIdentity), Trigger::Boot);
  EXPECT_TRUE(plan.changes.empty());
  EXPECT_TRUE(plan.skips.empty());
  EXPECT_TRUE(plan.satisfied.empty());
}

TEST(Planner, ABootRuleActsAtHotplugToo) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto plan = planOf(s, rules(kBootAndStart), Trigger::Hotplug);
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].rule.name, "nvme-boot");
}

TEST(Planner, HoldsABootRulesRebindAtStartAndNamesBoot) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto plan = planOf(s, rules(kBootAndStart), Trigger::Coldplug);
  EXPECT_TRUE(plan.changes.empty());
  const auto* skip = skipFor(plan, SkipReason::HotplugOnly);
  ASSERT_NE(skip, nullptr);
  EXPECT_EQ(skip->rule.name, "nvme-boot");
  EXPECT_NE(skip->message.find("acts only at boot"), std::string::npos) << skip->message;
  EXPECT_NE(skip->message.find("when = \"boot\""), std::string::npos) << skip->message;
}

TEST(Planner, LetsABootRulesHarmlessSettingActAtStart) {
  auto s = statusOf(*thunderboltNicWithModule());
  // The parameter rules, marked for boot.
  std::string text = kParamRules;
  text.insert(text.find("[rule.match]"), "when = \"boot\"\n");
  auto boot = rules(text);
  auto start = planOf(s, boot, Trigger::Coldplug);
  auto has = [](const core::Plan& p, ChangeKind k) {
    return std::any_of(p.changes.begin(), p.changes.end(), [&](const core::Change& c) { return c.kind == k; });
  };
  EXPECT_TRUE(has(start, ChangeKind::ModuleParam));
  EXPECT_TRUE(has(start, ChangeKind::ModprobeConf));
  // At boot the runtime parameter is set, but no modprobe.d file: the initramfs's /etc does not last.
  auto atBoot = planOf(s, boot, Trigger::Boot);
  EXPECT_TRUE(has(atBoot, ChangeKind::ModuleParam));
  EXPECT_FALSE(has(atBoot, ChangeKind::ModprobeConf));
  EXPECT_EQ(std::count_if(atBoot.skips.begin(), atBoot.skips.end(),
                          [](const core::Skip& sk) { return sk.kind == ChangeKind::ModprobeConf; }),
            0);
}

TEST(Planner, KeepsTheSafetyRulesAtBoot) {
  auto s = statusOf(*intelBareMetal());  // nvme0 holds / and /boot/efi
  auto plan = planOf(s, rules(R"(
[[rule]]
name = "nvme-boot"
description = "identity at boot"
when = "boot"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
)"),
                     Trigger::Boot);
  const auto* skip = skipFor(plan, SkipReason::InUse);
  ASSERT_NE(skip, nullptr);
  EXPECT_NE(skip->message.find("mounted"), std::string::npos) << skip->message;
}

TEST(Planner, NamesTheBootTriggerInItsText) {
  auto s = statusOf(*twoNvmeOneGroup());
  auto p = rules(kBootAndStart);
  auto text = app::planText(planOf(s, p, Trigger::Boot), s, p, false);
  EXPECT_NE(text.find("at boot"), std::string::npos) << text;
  EXPECT_NE(app::planJson(planOf(s, p, Trigger::Boot), p).find("\"trigger\": \"boot\""), std::string::npos);
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

}  // namespace planner_test
