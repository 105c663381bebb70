#pragma once

// The domain type of each IOMMU group rules ask for: whether every endpoint wants the same, the
// safety verdict (core/domain_safety), the trade-off in words, its acceptance, and when it may act.

#include <string>
#include <vector>

#include "core/plan/context.hpp"
#include "core/plan/recorder.hpp"

namespace iommud::core::planning {

// What a domain type gives up or gains, in words, for `object` ("group 14") and its `devices`.
struct TradeOff {
  Risk risk = Risk::None;
  std::string text;
};
TradeOff tradeOffOf(DomainType target, const std::string& object, const std::string& devices);

// `devices` runs parallel to the host's devices, each with the rule that won its domain type.
void planDomains(const PlanInput& in, const std::vector<DeviceCtx>& devices, Recorder& out);

}  // namespace iommud::core::planning
