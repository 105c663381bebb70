#pragma once
// What the apply, revert and record store tests share: a synthetic host with the fake kernel
// behind the sysfs writer and a fake ethtool, and the outcomes in words.

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/change/apply.hpp"
#include "app/change/planning.hpp"
#include "support/fake_kernel.hpp"
#include "unit/test_host.hpp"

namespace iommud::testing {

// A NIC's ethtool values, as a driver keeps them.
class FakeEthtool final : public app::EthtoolPort {
 public:
  std::map<std::pair<core::ChangeKind, std::string>, uint32_t> values;
  core::Result<uint32_t> get(int, core::ChangeKind kind, const std::string& key) override {
    auto it = values.find({kind, key});
    if (it == values.end()) return core::Error{EOPNOTSUPP, "", "not supported"};
    return it->second;
  }
  std::function<uint32_t(uint32_t)> rounds = [](uint32_t v) { return v; };  // what the driver keeps of a value
  core::Result<core::Done> set(int, core::ChangeKind kind, const std::string& key, uint32_t value) override {
    values[{kind, key}] = rounds(value);
    return core::Done{};
  }
};

struct Bench {
  std::unique_ptr<FakeHost> host;
  FakeKernel kernel;
  adapters::sysfs::Root root;
  FakeEthtool ethtool;
  app::ApplyContext ctx;

  Bench(std::unique_ptr<FakeHost> h, core::KernelVersion v)
      : host(std::move(h)), kernel(host->root(), v), root(host->rootString()), ctx{root, kernel, &ethtool, {}, {}, {}} {
    ctx.now = [] { return std::string("2026-11-21T12:00:00Z"); };
  }
  app::Status status() const { return statusOf(*host); }
  std::vector<app::Outcome> apply(const core::PolicySet& p, core::Trigger t = core::Trigger::Hotplug) {
    auto s = status();
    core::PlanOptions o;
    o.trigger = t;
    if (!ethtool.values.empty()) {
      for (auto& d : s.host.devices) {
        for (auto& n : d.netdevs) {
          n.ethtool.read = true;
          for (const auto& [k, v] : ethtool.values) {
            if (k.first == core::ChangeKind::Rings) n.ethtool.rings[k.second] = v;
            if (k.first == core::ChangeKind::Coalesce) n.ethtool.coalesce[k.second] = v;
          }
          n.ethtool.ringsMax = {{"rx", 8184}, {"tx", 8184}};
        }
      }
    }
    auto plan = core::plan({s.host, s.mode, s.findings}, p, o);
    app::listInitramfsFor(root, plan, s);  // as iommuctl's planning does
    return app::applyPlan(plan, s.host, ctx);
  }
  std::vector<app::Outcome> revert(std::optional<std::string> device = std::nullopt) {
    return app::revertChanges(device, status().host, ctx);
  }
  std::string read(const std::string& path) const { return root.readFile(path).valueOr(std::string("(absent)")); }
};

inline std::string describe(const std::vector<app::Outcome>& outcomes) {
  std::string s;
  for (const auto& o : outcomes) s += std::string(app::toString(o.result)) + ": " + o.message + "\n";
  return s;
}

inline int count(const std::vector<app::Outcome>& outcomes, app::Outcome::Result result) {
  return static_cast<int>(
      std::count_if(outcomes.begin(), outcomes.end(), [&](const auto& o) { return o.result == result; }));
}

}  // namespace iommud::testing
