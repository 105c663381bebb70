#pragma once

// Whether a rule's conditions hold for a device on this host: short-circuiting while planning,
// every condition with what the host has for `iommuctl explain`.

#include <string>
#include <utility>
#include <vector>

#include "core/plan/context.hpp"

namespace iommud::core::planning {

// Evaluates conditions either short-circuiting (planning) or collecting every result (explain).
template <bool Collect>
class Eval {
 public:
  explicit Eval(std::vector<ConditionResult>* out) : out_(out) {}
  template <class Describe>
  bool operator()(bool holds, Describe&& describe) {
    all_ = all_ && holds;
    if constexpr (Collect) {
      auto [cond, actual] = describe();
      out_->push_back(ConditionResult{std::move(cond), holds, std::move(actual)});
      return true;
    } else {
      (void)describe;
      return holds;
    }
  }
  [[nodiscard]] bool all() const { return all_; }

 private:
  std::vector<ConditionResult>* out_;
  bool all_ = true;
};

// The device conditions of `m` (prefix "unless." names those of an [[rule.unless]] entry).
template <bool Collect>
bool matchDevice(const DeviceMatch& m, const DeviceCtx& c, Eval<Collect>& e, const char* prefix);

// The host conditions of `m`; `c` null: findings count wherever they are on the host.
template <bool Collect>
bool matchHost(const HostMatch& m, const HostCtx& h, Eval<Collect>& e, const DeviceCtx* c);

template <bool Collect>
bool matchRule(const Rule& r, const HostCtx& h, const DeviceCtx& c, Eval<Collect>& e);

extern template bool matchHost<false>(const HostMatch&, const HostCtx&, Eval<false>&, const DeviceCtx*);
extern template bool matchRule<false>(const Rule&, const HostCtx&, const DeviceCtx&, Eval<false>&);
extern template bool matchRule<true>(const Rule&, const HostCtx&, const DeviceCtx&, Eval<true>&);

}  // namespace iommud::core::planning
