#include "core/plan/recorder.hpp"

namespace iommud::core::planning {

RuleRef refOf(const Rule& r) {
  return RuleRef{r.name, r.where};
}

void Recorder::skip(ChangeKind kind, const std::string& device, std::string object, std::string key, std::string wanted,
                    const Rule& r, SkipReason reason, std::string message) {
  plan.skips.push_back(
      Skip{kind, device, std::move(object), std::move(key), std::move(wanted), refOf(r), reason, std::move(message)});
}

bool Recorder::allowedNow(const Rule& r, bool disruptive) const {
  if (options.trigger != Trigger::Coldplug || modeOf(r) == RuleMode::Advise) return true;
  switch (r.when.value_or(disruptive ? When::Hotplug : When::Always)) {
    case When::Always: return true;
    case When::Boot: return !disruptive;
    case When::Hotplug: break;
  }
  return false;
}

std::string Recorder::hotplugOnlyMessage(const Rule& r, const std::string& what) {
  if (r.when == When::Boot) {
    return what +
           " acts only at boot (iommud --early, before anything holds the device) or when the device "
           "has just appeared (the rule says when = \"boot\"; rebuild the initramfs after changing it)";
  }
  return what + " acts only when the device has just appeared" +
         (r.when ? std::string(" (the rule says when = \"hotplug\")")
                 : std::string(" (disruptive changes default to hotplug; set when = \"always\" to allow it at start)"));
}

}  // namespace iommud::core::planning
