#include "core/plan/nic_settings.hpp"

#include <optional>
#include <string>

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
      for (const auto& n : c.dev->netdevs) planEthtoolValue(Wish{c, n, kind, *k, r, disruptive}, value, wanted);
    }
  }

  // One setting of one interface, as a rule wants it.
  struct Wish {
    const DeviceCtx& c;
    const NetDev& n;
    ChangeKind kind;
    const EthtoolKey& k;
    const Rule& r;
    bool disruptive;
  };
  // The setting as it is and as it will be.
  struct Values {
    std::string from;
    std::string to;
    std::string note;  // why `from` is not known
  };

  void planEthtoolValue(const Wish& w, std::optional<uint32_t> value, const std::string& wanted) {
    Values v{"unknown", wanted, {}};
    if (!w.n.ethtool.read) {
      v.note = "current values not read (no ethtool access under --root)";
    } else if (!readValues(w, value, v)) {
      return;
    }
    if (!mayActNow(w, v.to)) return;
    out_.plan.changes.push_back(changeOf(w, v));
  }

  void skip(const Wish& w, const std::string& value, SkipReason reason, std::string message) {
    out_.skip(w.kind, w.c.dev->address, w.n.name, std::string(w.k.name), value, w.r, reason, std::move(message));
  }

  // The value now and the one wanted ("max" resolved), against what the driver reports and allows:
  // false when the setting is skipped or already has its value.
  bool readValues(const Wish& w, std::optional<uint32_t> value, Values& v) {
    const std::string key(w.k.name);
    const auto& e = w.n.ethtool;
    const auto* current = w.kind == ChangeKind::Rings      ? &e.rings
                          : w.kind == ChangeKind::Channels ? &e.channels
                                                           : &e.coalesce;
    const auto* maxima = w.kind == ChangeKind::Rings      ? &e.ringsMax
                         : w.kind == ChangeKind::Channels ? &e.channelsMax
                                                          : nullptr;
    auto cur = current->find(key);
    if (cur == current->end()) {
      skip(w, v.to, SkipReason::Unsupported,
           w.n.name + " (" + w.c.dev->driver.value_or("no driver") + ") does not report " +
               std::string(toString(w.kind)) + " " + key + ": its driver does not support it");
      return false;
    }
    v.from = formatEthtoolValue(w.k.type, cur->second);
    std::optional<uint32_t> max;
    if (maxima != nullptr) {
      if (auto m = maxima->find(key); m != maxima->end()) max = m->second;
    }
    if (!value) {
      if (!max) {
        skip(w, v.to, SkipReason::Unsupported, w.n.name + " reports no maximum for " + key);
        return false;
      }
      value = max;
    } else if (max && *value > *max) {
      skip(w, v.to, SkipReason::Unsupported,
           w.n.name + " allows at most " + std::to_string(*max) + " for " + key + "; the kernel would refuse " +
               std::to_string(*value));
      return false;
    }
    v.to = formatEthtoolValue(w.k.type, *value);
    if (cur->second == *value) {
      out_.plan.satisfied.push_back(Satisfied{w.kind, w.c.dev->address, w.n.name, key, v.to, refOf(w.r)});
      return false;
    }
    return true;
  }

  bool mayActNow(const Wish& w, const std::string& to) {
    const std::string kind(toString(w.kind));
    if (!out_.allowedNow(w.r, w.disruptive)) {
      skip(w, to, SkipReason::HotplugOnly,
           Recorder::hotplugOnlyMessage(w.r, "setting " + kind + " resets the link on many drivers; it"));
      return false;
    }
    // A safety rule, not a default: at start (package installation, restart, `iommuctl apply`)
    // no rule, not even one saying when = "always", resets the link of a NIC that carries traffic.
    if (w.disruptive && out_.options.trigger == Trigger::Coldplug && out_.modeOf(w.r) == RuleMode::Apply &&
        !w.c.dev->inUse.empty()) {
      skip(w, to, SkipReason::InUse,
           w.n.name + " is in use (" + w.c.dev->inUse.front().detail + "): setting " + kind +
               " resets the link on many drivers, which iommud never does to a NIC in use at start, whatever "
               "the rule's `when`; it acts when the device next appears, or now with `iommuctl apply --hotplug "
               "--device " +
               w.n.name + "`");
      return false;
    }
    return true;
  }

  Change changeOf(const Wish& w, Values& v) const {
    Change ch;
    ch.kind = w.kind;
    ch.device = w.c.dev->address;
    ch.devices = {w.c.dev->address};
    ch.group = w.c.dev->group;
    ch.object = w.n.name;
    ch.key = std::string(w.k.name);
    ch.from = std::move(v.from);
    ch.to = std::move(v.to);
    ch.rule = refOf(w.r);
    ch.mode = out_.modeOf(w.r);
    ch.tradeOff = "does not change DMA isolation";
    ch.disruptive = w.disruptive;
    ch.note = w.disruptive ? (v.note.empty() ? "" : v.note + "; ") + std::string("may reset the link") : v.note;
    return ch;
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
