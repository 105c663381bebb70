#include "core/names.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "adapters/dbus/access.hpp"
#include "adapters/ethtool/codec.hpp"
#include "app/change/outcome.hpp"
#include "app/host/verify.hpp"
#include "app/report/top.hpp"
#include "app/worker/worker_report.hpp"
#include "config/daemon_config.hpp"
#include "core/arch.hpp"
#include "core/dma_stats.hpp"
#include "core/exposure.hpp"
#include "core/findings.hpp"
#include "core/host.hpp"
#include "core/kernel_version.hpp"
#include "core/mode.hpp"
#include "core/net_owners.hpp"
#include "core/plan.hpp"
#include "core/policy.hpp"
#include "core/protections.hpp"

// Every core::Names table in src round-trips: each value of its enum (0..N-1, not the table's own
// entries) has the name written here, that name reads back as the value, the enum's toString and
// parser say the same, and a name the table lacks reads as nothing. The names are spelt here a
// second time on purpose: status, plan, JSON, the exports and the worker's wire print them, so a
// changed entry must fail a test (the golden files only cover the names a scenario happens to show).

namespace names_test {

using namespace iommud;
using namespace iommud::core;

// Found by argument-dependent lookup in the enum's namespace.
constexpr auto kToString = [](auto v) { return toString(v); };

template <class E, std::size_t N, class ToString = std::nullptr_t>
void expectNames(const Names<E, N>& table, const std::array<std::string_view, N>& names, ToString toStr = nullptr) {
  for (std::size_t i = 0; i < N; ++i) {
    const auto v = static_cast<E>(i);
    SCOPED_TRACE(::testing::Message() << "value " << i << " of " << N);
    EXPECT_EQ(nameOf(table, v), names[i]);
    auto back = valueNamed(table, names[i]);
    ASSERT_TRUE(back.has_value());
    EXPECT_TRUE(*back == v);
    if constexpr (!std::is_same_v<ToString, std::nullptr_t>) {
      EXPECT_EQ(std::string_view(toStr(v)), names[i]);
    }
  }
  EXPECT_FALSE(valueNamed(table, "no-such-name").has_value());
  EXPECT_FALSE(valueNamed(table, "").has_value());
}

// The enum's own parser reads each name as the table does.
template <class E, std::size_t N, class Parse>
void expectParser(const Names<E, N>& table, Parse parse) {
  for (const auto& [v, name] : table) {
    auto parsed = parse(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_TRUE(*parsed == v) << name;
  }
  EXPECT_FALSE(parse("no-such-name").has_value());
}

TEST(Names, Host) {
  expectNames(kVendorNames, {"none", "intel", "amd", "arm-smmu", "arm-smmu-v3", "virtio", "unknown"}, kToString);
  expectNames(kDomainTypeNames, {"DMA", "DMA-FQ", "identity", "blocked", "unmanaged", "unknown"}, kToString);
  expectParser(kDomainTypeNames, parseDomainType);
  EXPECT_EQ(parseDomainType("DMA-FQ\n"), DomainType::DmaFq);  // a type file, newline and all
  EXPECT_EQ(parseDomainType(" identity "), DomainType::Identity);
  expectNames(
      kInUseReasonKindNames,
      {"mounted", "swap", "held", "root-device", "net-address", "net-route", "net-enslaved", "vfio", "sriov-vfs"},
      kToString);
  expectNames(kRemovableNames, {"unknown", "removable", "fixed", "absent"}, kToString);
  expectNames(kDeviceKindNames, {"nic", "nvme", "bridge", "other"}, kToString);
  expectNames(kConfidentialNames, {"none", "sev", "sev-es", "sev-snp", "tdx", "unknown"}, kToString);
  expectNames(kArchNames, {"unknown", "x86", "arm64", "other"}, kToString);
}

TEST(Names, Judgements) {
  expectNames(kExposureNames, {"all-memory", "mapped-window", "mapped", "mapped-subpage", "none", "unknown"},
              kToString);
  expectNames(kSeverityNames, {"info", "warning", "error"}, kToString);
  expectNames(kVersionSourceNames, {"proc_version", "version_signature", "release", "unknown"}, kToString);
  expectNames(kReasonSourceNames,
              {"firmware", "config", "cmdline", "driver", "runtime", "inferred", "group", "device", "iommud"},
              kToString);
  expectNames(kProtectionStateNames, {"on", "off", "weakened", "not-applicable", "unknown"}, kToString);
}

TEST(Names, Policy) {
  expectNames(kDomainRequestNames, {"identity", "DMA", "DMA-FQ", "auto"}, kToString);
  expectParser(kDomainRequestNames, parseDomainRequest);
  expectNames(ParamSetting::kAtNames, {"runtime", "load"});
  expectNames(ParamSetting::kTakesEffectNames, {"now", "probe"});
  expectNames(kRuleModeNames, {"apply", "advise"}, kToString);
  expectNames(kWhenNames, {"hotplug", "always", "boot"}, kToString);
  expectNames(kRiskNames, {"none", "low", "medium", "high"}, kToString);
  expectNames(kAcceptanceNames, {"no-isolation", "lazy-invalidation"}, kToString);
  expectParser(kAcceptanceNames, parseAcceptance);
}

TEST(Names, Plan) {
  expectNames(kTriggerNames, {"hotplug", "coldplug", "boot"}, kToString);
  expectNames(kChangeKindNames, {"module-param", "domain", "rings", "channels", "coalesce", "modprobe-conf"},
              kToString);
  expectParser(kChangeKindNames, parseChangeKind);
  expectNames(
      kSkipReasonNames,
      {"hotplug-only", "untrusted", "needs-acceptance", "in-use", "never-unbind", "group-uncovered", "conflict",
       "kernel-too-old", "unsupported", "no-iommu", "no-netdev", "param-missing", "param-read-only", "overridden"},
      kToString);
}

TEST(Names, NetworkSettings) {
  expectNames(kNetSettingKindNames, {"rings", "channels", "coalesce"}, kToString);
  expectNames(kNetOwnerNames, {"NetworkManager", "systemd-udevd"}, kToString);
  expectNames(kCertaintyNames, {"applies", "may-apply"}, kToString);
  expectNames(adapters::ethtool::kKindNames, {"rings", "channels", "coalesce"}, kToString);
}

TEST(Names, App) {
  expectNames(kDmaSortKeyNames, {"maps", "mib", "mean-size", "bounces", "faults", "device"},
              [](DmaSortKey k) { return app::toString(k); });
  expectNames(app::kVerifiedStateNames, {"as-recorded", "drifted", "gone", "unchecked"}, kToString);
  expectNames(app::kOutcomeResultNames, {"done", "advised", "refused", "failed", "drift", "kept", "skipped", "lost"},
              kToString);
  expectNames(app::kDeviceNewsNames,
              {"forget", "tuned", "advised", "refused", "failed", "replugged", "rebound", "reverted"});
  expectNames(app::WorkerCall::kKindNames, {"plan", "apply", "revert"});
  expectNames(app::WorkerRequest::kKindNames, {"batch", "call", "view", "recover"});
  expectNames(config::kLogLevelNames, {"error", "warning", "notice", "info", "debug"}, kToString);
  expectNames(adapters::dbus::kGuardedNames, {"Apply", "Revert", "Reload"},
              [](adapters::dbus::Guarded g) { return adapters::dbus::methodName(g); });
}

}  // namespace names_test
