#include "core/plan/device_index.hpp"

#include <algorithm>
#include <optional>

namespace iommud::core::planning {

DeviceIndex::DeviceIndex(std::vector<DeviceCtx>& devices) : all_(devices.size()) {
  for (size_t i = 0; i < devices.size(); ++i) {
    DeviceCtx* c = &devices[i];
    all_[i] = c;
    kinds_[static_cast<size_t>(c->kind)].push_back(c);
    vendors_.emplace_back(c->dev->vendorId, c);
    addresses_.emplace_back(c->addressName, c);
    for (auto n : c->names) names_.emplace_back(n, c);
    for (auto d : c->driver()) drivers_.emplace_back(d, c);
  }
  for (auto* keyed : {&addresses_, &names_, &drivers_}) {
    if (!std::is_sorted(keyed->begin(), keyed->end())) std::sort(keyed->begin(), keyed->end());
  }
  std::sort(vendors_.begin(), vendors_.end());
}

std::vector<DeviceCtx*> DeviceIndex::candidates(const DeviceMatch& m) const {
  using Run = std::pair<const Keyed*, std::vector<std::pair<size_t, size_t>>>;
  std::optional<Run> best;
  size_t bestCount = all_.size();
  auto consider = [&](const Keyed& keyed, const std::vector<Glob>& globs) {
    if (globs.empty()) return;
    Run run{&keyed, {}};
    size_t count = 0;
    for (const auto& g : globs) {
      std::string_view prefix = g.literalPrefix();
      auto lo = std::lower_bound(keyed.begin(), keyed.end(), prefix,
                                 [](const auto& e, std::string_view p) { return e.first < p; });
      // Names with the prefix follow their lower bound contiguously.
      auto hi = std::partition_point(lo, keyed.end(), [&](const auto& e) { return e.first.starts_with(prefix); });
      run.second.emplace_back(lo - keyed.begin(), hi - keyed.begin());
      count += static_cast<size_t>(hi - lo);
    }
    if (count < bestCount) {
      bestCount = count;
      best = std::move(run);
    }
  };
  consider(addresses_, m.addresses);
  consider(names_, m.names);
  consider(drivers_, m.drivers);
  size_t vendorCount = 0;
  for (auto v : m.vendor) vendorCount += vendorRange(v).size();
  size_t kindCount = 0;
  for (auto k : m.kinds) kindCount += kinds_[static_cast<size_t>(k)].size();

  std::vector<DeviceCtx*> out;
  if (!m.vendor.empty() && vendorCount <= std::min(bestCount, m.kinds.empty() ? bestCount : kindCount)) {
    for (auto v : m.vendor) {
      for (const auto& e : vendorRange(v)) out.push_back(e.second);
    }
  } else if (!m.kinds.empty() && kindCount <= bestCount) {
    for (auto k : m.kinds)
      out.insert(out.end(), kinds_[static_cast<size_t>(k)].begin(), kinds_[static_cast<size_t>(k)].end());
    if (m.kinds.size() == 1) return out;  // already in host order
  } else if (best) {
    for (auto [lo, hi] : best->second) {
      for (size_t i = lo; i < hi; ++i) out.push_back((*best->first)[i].second);
    }
  } else {
    return all_;
  }
  // Host order, each device once (a device has several names; globs may overlap).
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::span<const std::pair<uint16_t, DeviceCtx*>> DeviceIndex::vendorRange(uint16_t v) const {
  auto lo =
      std::lower_bound(vendors_.begin(), vendors_.end(), v, [](const auto& e, uint16_t x) { return e.first < x; });
  auto hi = std::upper_bound(lo, vendors_.end(), v, [](uint16_t x, const auto& e) { return x < e.first; });
  return {lo, hi};
}

}  // namespace iommud::core::planning
