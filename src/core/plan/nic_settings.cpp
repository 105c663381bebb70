#include "core/plan/nic_settings.hpp"

namespace iommud::core::planning {

namespace {

class NicPlanner {
 public:
  NicPlanner(const HostCtx& host, const std::vector<DeviceCtx>& devices, Recorder& out)
      : host_(host), devices_(devices), out_(out) {}

  void run() {
    for (const auto& c : devices_) {
      planEthtoolKind(c, c.rings, ChangeKind::Rings, ringKeys(), true);
      planEthtoolKind(c, c.channels, ChangeKind::Channels, channelKeys(), true);
      planEthtoolKind(c, c.coalesce, ChangeKind::Coalesce, coalesceKeys(), false);
    }
  }

 private:
  void planEthtoolKind(const DeviceCtx& c, const std::vector<std::pair<std::string_view, const Rule*>>& wishes,
                       ChangeKind kind, const std::vector<EthtoolKey>& keys, bool disruptive) {
    const std::string& a = c.dev->address;
    for (const auto& [keyView, rule] : wishes) {
      const std::string key(keyView);
      const Rule& r = *rule;
      const EthtoolKey* k = findEthtoolKey(keys, key);
      std::optional<uint32_t> value;
      bool isMax = false;
      if (kind == ChangeKind::Rings) {
        value = r.rings.at(key).value;
        isMax = !value;
      } else if (kind == ChangeKind::Channels) {
        value = r.channels.at(key).value;
        isMax = !value;
      } else {
        value = r.coalesce.at(key);
      }
      std::string wanted = isMax ? "max" : formatEthtoolValue(k->type, *value);
      if (c.dev->netdevs.empty()) {
        out_.skip(kind, a, std::string(toString(kind)), key, wanted, r, SkipReason::NoNetdev,
                  c.dev->displayName() + " has no network interface to set " + key + " on");
        continue;
      }
      if (host_.version && *host_.version < k->since) {
        out_.skip(kind, a, std::string(toString(kind)), key, wanted, r, SkipReason::KernelTooOld,
                  "ethtool " + std::string(toString(kind)) + " " + key + " needs Linux " + k->since.str() +
                      " (this kernel is " + host_.version->str() + ")");
        continue;
      }
      for (const auto& n : c.dev->netdevs) {
        planEthtoolValue(c, n, kind, *k, r, value, wanted, disruptive);
      }
    }
  }

  void planEthtoolValue(const DeviceCtx& c, const NetDev& n, ChangeKind kind, const EthtoolKey& k, const Rule& r,
                        std::optional<uint32_t> value, const std::string& wanted, bool disruptive) {
    const std::string key(k.name);
    const auto& e = n.ethtool;
    const auto* current = kind == ChangeKind::Rings      ? &e.rings
                          : kind == ChangeKind::Channels ? &e.channels
                                                         : &e.coalesce;
    const auto* maxima = kind == ChangeKind::Rings      ? &e.ringsMax
                         : kind == ChangeKind::Channels ? &e.channelsMax
                                                        : nullptr;
    std::string from = "unknown";
    std::string to = wanted;
    std::string note;
    if (e.read) {
      auto cur = current->find(key);
      if (cur == current->end()) {
        out_.skip(kind, c.dev->address, n.name, key, wanted, r, SkipReason::Unsupported,
                  n.name + " (" + c.dev->driver.value_or("no driver") + ") does not report " +
                      std::string(toString(kind)) + " " + key + ": its driver does not support it");
        return;
      }
      from = formatEthtoolValue(k.type, cur->second);
      std::optional<uint32_t> max;
      if (maxima != nullptr) {
        if (auto m = maxima->find(key); m != maxima->end()) max = m->second;
      }
      if (!value) {
        if (!max) {
          out_.skip(kind, c.dev->address, n.name, key, wanted, r, SkipReason::Unsupported,
                    n.name + " reports no maximum for " + key);
          return;
        }
        value = max;
      } else if (max && *value > *max) {
        out_.skip(kind, c.dev->address, n.name, key, wanted, r, SkipReason::Unsupported,
                  n.name + " allows at most " + std::to_string(*max) + " for " + key + "; the kernel would refuse " +
                      std::to_string(*value));
        return;
      }
      to = formatEthtoolValue(k.type, *value);
      if (cur->second == *value) {
        out_.plan.satisfied.push_back(Satisfied{kind, c.dev->address, n.name, key, to, refOf(r)});
        return;
      }
    } else {
      note = "current values not read (no ethtool access under --root)";
    }
    if (!out_.allowedNow(r, disruptive)) {
      out_.skip(kind, c.dev->address, n.name, key, to, r, SkipReason::HotplugOnly,
                Recorder::hotplugOnlyMessage(
                    r, "setting " + std::string(toString(kind)) + " resets the link on many drivers; it"));
      return;
    }
    // A safety rule, not a default: at start (package installation, restart, `iommuctl apply`)
    // no rule, not even one saying when = "always", resets the link of a NIC that carries traffic.
    if (disruptive && out_.options.trigger == Trigger::Coldplug && out_.modeOf(r) == RuleMode::Apply &&
        !c.dev->inUse.empty()) {
      out_.skip(kind, c.dev->address, n.name, key, to, r, SkipReason::InUse,
                n.name + " is in use (" + c.dev->inUse.front().detail + "): setting " + std::string(toString(kind)) +
                    " resets the link on many drivers, which iommud never does to a NIC in use at start, whatever "
                    "the rule's `when`; it acts when the device next appears, or now with `iommuctl apply --hotplug "
                    "--device " +
                    n.name + "`");
      return;
    }
    Change ch;
    ch.kind = kind;
    ch.device = c.dev->address;
    ch.devices = {c.dev->address};
    ch.group = c.dev->group;
    ch.object = n.name;
    ch.key = key;
    ch.from = from;
    ch.to = to;
    ch.rule = refOf(r);
    ch.mode = out_.modeOf(r);
    ch.tradeOff = "does not change DMA isolation";
    ch.disruptive = disruptive;
    ch.note = disruptive ? (note.empty() ? "" : note + "; ") + std::string("may reset the link") : note;
    out_.plan.changes.push_back(std::move(ch));
  }

  const HostCtx& host_;
  const std::vector<DeviceCtx>& devices_;
  Recorder& out_;
};

}  // namespace

void planNicSettings(const HostCtx& host, const std::vector<DeviceCtx>& devices, Recorder& out) {
  NicPlanner(host, devices, out).run();
}

}  // namespace iommud::core::planning
