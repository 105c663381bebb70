#include "app/daemon/hotplug_filter.hpp"

#include <algorithm>

#include "core/host.hpp"

namespace iommud::app {

namespace {

// A uevent that means the device just appeared to its driver: the moment hotplug rules act. Not
// a replay (udev's coldplug at boot, `udevadm trigger`): those devices were there before.
bool appears(const adapters::udev::UEvent& e) {
  return !e.synthetic && (e.action == "add" || (e.subsystem == "pci" && e.action == "bind"));
}

}  // namespace

HotplugFilter::Verdict HotplugFilter::event(const adapters::udev::UEvent& e, TimePoint now, bool stopping) {
  using Kind = Verdict::Kind;
  // A Thunderbolt device's PCI functions arrive as their own pci events; its path holds only the
  // host controller's address.
  if (e.subsystem == "thunderbolt") return {};
  Verdict v{Kind::Pending, core::pciFunctionOf(e.devpath), false, ""};
  if (v.address.empty()) return {};
  const bool pciAdd = e.subsystem == "pci" && e.action == "add";
  if (e.subsystem == "pci" && e.action == "remove") {
    forget(v.address);
    if (working_) removedMeanwhile_.insert(v.address);
    v.kind = Kind::Removed;
    return v;
  }
  if (pciAdd && !e.synthetic && !atStart_.contains(v.address)) {
    fresh_.insert(v.address);
    rebound_.erase(v.address);
    if (working_) pluggedMeanwhile_.insert(v.address);
  }
  v.hot = appears(e) && fresh_.contains(v.address) && !rebound_.contains(v.address);
  if (stopping) {
    v.kind = Kind::Stopping;
    return v;
  }
  if (auto left = leftAlone_.find(v.address); left != leftAlone_.end()) {
    if (!pciAdd) {
      v.kind = Kind::LeftAlone;
      v.why = left->second;
      return v;
    }
    leftAlone_.erase(left);
  }
  if (v.hot) hot_.insert(v.address);
  pending_[v.address] = now + debounce_;
  return v;
}

std::vector<std::string> HotplugFilter::resync(const std::vector<std::string>& present, TimePoint now) {
  const std::set<std::string> here(present.begin(), present.end());
  std::vector<std::string> gone;
  for (const auto* known : {&atStart_, &fresh_}) {
    for (const auto& a : *known) {
      if (!here.contains(a)) gone.push_back(a);
    }
  }
  std::sort(gone.begin(), gone.end());
  gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
  for (const auto& a : gone) forget(a);
  for (const auto& a : here) {
    bool hot = hot_.contains(a) || (queued_.contains(a) && queued_[a]);
    if (!atStart_.contains(a) && !fresh_.contains(a)) {  // its add was lost: a plug
      fresh_.insert(a);
      rebound_.erase(a);
      leftAlone_.erase(a);
      if (working_) pluggedMeanwhile_.insert(a);
      hot = true;
    }
    if (leftAlone_.contains(a)) {
      dropPending(a);
      continue;
    }
    pending_.erase(a);
    hot_.erase(a);
    queued_[a] = hot;
    firedAt_[a] = now;
  }
  return gone;
}

std::optional<HotplugFilter::TimePoint> HotplugFilter::nextDeadline() const {
  if (pending_.empty()) return std::nullopt;
  return std::min_element(pending_.begin(), pending_.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->second;
}

void HotplugFilter::expire(TimePoint now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second > now) {
      ++it;
      continue;
    }
    const bool hot = hot_.erase(it->first) > 0;
    queued_[it->first] = queued_[it->first] || hot;
    firedAt_[it->first] = now;
    it = pending_.erase(it);
  }
}

Batch HotplugFilter::takeQueued() {
  Batch b;
  for (const auto& [address, hot] : queued_) (hot ? b.hot : b.cold).push_back(address);
  queued_.clear();
  return b;
}

void HotplugFilter::failed(const std::string& address) {
  // (A device plugged in again meanwhile is a new try.)
  if (!pluggedMeanwhile_.contains(address)) leftAlone_[address] = "its last change failed";
}

void HotplugFilter::reverted(const std::string& address) {
  leftAlone_[address] = "it was reverted";
  rebound(address);
}

void HotplugFilter::rebound(const std::string& address) {
  // Plugged in again while the worker ran (a PCI remove, then add): a new device, whose events are
  // no echo of the worker's rebind.
  if (pluggedMeanwhile_.contains(address)) return;
  rebound_.insert(address);
  // Its bind events, already in, are the daemon's own: no hotplug.
  hot_.erase(address);
  if (auto q = queued_.find(address); q != queued_.end()) q->second = false;
}

void HotplugFilter::dropLeftAlonePending() {
  for (const auto& [address, _] : leftAlone_) dropPending(address);
}

std::optional<std::chrono::duration<double, std::milli>> HotplugFilter::reacted(const std::string& address,
                                                                                TimePoint now) {
  auto it = firedAt_.find(address);
  if (it == firedAt_.end()) return std::nullopt;
  std::chrono::duration<double, std::milli> took = now - it->second;
  firedAt_.erase(it);
  return took;
}

void HotplugFilter::dropPending(const std::string& address) {
  pending_.erase(address);
  queued_.erase(address);
  hot_.erase(address);
  firedAt_.erase(address);
}

void HotplugFilter::forget(const std::string& address) {
  dropPending(address);
  leftAlone_.erase(address);
  rebound_.erase(address);
  atStart_.erase(address);
  fresh_.erase(address);
}

}  // namespace iommud::app
