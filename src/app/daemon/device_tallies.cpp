#include "app/daemon/device_tallies.hpp"

namespace iommud::app {

void DeviceTallies::take(const DeviceEvent& e) {
  if (e.news == DeviceNews::Forget) {
    tallies_.erase(e.address);
    return;
  }
  auto& t = tallies_[e.address];
  if (!e.identity.empty()) t.identity = e.identity;  // "" where the worker did not know it
  switch (e.news) {
    case DeviceNews::Tuned: t.tuned = true; break;
    case DeviceNews::Advised: t.advised = true; break;
    case DeviceNews::Refused: t.refused = true; break;
    case DeviceNews::Failed:
      t.failed = true;
      anyFailed_ = true;
      break;
    case DeviceNews::Replugged: departed_.erase(t.identity); break;
    case DeviceNews::Reverted:
    case DeviceNews::Rebound:
    case DeviceNews::Forget: break;
  }
}

bool DeviceTallies::removed(const std::string& address) {
  auto it = tallies_.find(address);
  if (it == tallies_.end()) return false;
  if (it->second.tuned && !it->second.identity.empty()) departed_[it->second.identity] = address;
  tallies_.erase(it);
  return true;
}

std::string DeviceTallies::statusLine() const {
  size_t tuned = 0, advised = 0, refused = 0, failed = 0;
  for (const auto& [_, t] : tallies_) {
    if (t.failed) {
      ++failed;
    } else if (t.tuned) {
      ++tuned;
    }
    if (t.advised) ++advised;
    if (t.refused) ++refused;
  }
  return std::to_string(tuned) + " devices tuned, " + std::to_string(advised) + " advised, " + std::to_string(refused) +
         " refused, " + std::to_string(failed) + " failed" +
         (wholeHostCutShort_ ? "; the pass over the whole host was cut short (the journal says why; systemctl "
                               "reload iommud tries again)"
                             : "");
}

void absorb(const std::vector<DeviceEvent>& news, bool wholeHost, DeviceTallies& tallies, HotplugFilter& filter) {
  if (wholeHost) {
    tallies.clear();
    filter.clearLeftAlone();
  }
  for (const auto& e : news) {
    tallies.take(e);
    switch (e.news) {
      case DeviceNews::Forget: filter.forgetLeftAlone(e.address); break;
      case DeviceNews::Failed: filter.failed(e.address); break;
      case DeviceNews::Reverted: filter.reverted(e.address); break;
      case DeviceNews::Rebound: filter.rebound(e.address); break;
      default: break;
    }
  }
}

void absorbCutShort(const std::vector<std::string>& devices, bool wholeHost, DeviceTallies& tallies,
                    HotplugFilter& filter) {
  if (wholeHost) tallies.wholeHostCutShort();
  std::vector<DeviceEvent> failed;
  failed.reserve(devices.size());
  for (const auto& a : devices) failed.push_back({DeviceNews::Failed, a, ""});
  absorb(failed, false, tallies, filter);
}

}  // namespace iommud::app
