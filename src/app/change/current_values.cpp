#include "app/change/current_values.hpp"

#include <cerrno>

#include "core/policy.hpp"
#include "core/text.hpp"

namespace iommud::app {

namespace {

using adapters::sysfs::Root;
using core::ChangeKind;

Observed value(std::string v) {
  return {Observed::State::Value, std::move(v), ""};
}
Observed gone(std::string why) {
  return {Observed::State::Gone, "", std::move(why)};
}
Observed unreadable(std::string why) {
  return {Observed::State::Unreadable, "", std::move(why)};
}

// The file's text; gone (`goneWhy`) when it does not exist, unreadable for any other failure.
Observed readValue(const Root& root, const std::string& path, const std::string& goneWhy) {
  auto text = root.readFile(path);
  if (text) return value(std::move(text).value());
  return text.error().code == ENOENT ? gone(goneWhy) : unreadable(text.error().describe());
}

bool deviceGone(const Root& root, const ChangeRecord& r) {
  if (r.device.empty()) return false;
  auto mode = root.fileMode("/sys/bus/pci/devices/" + r.device);
  return !mode && mode.error().code == ENOENT;
}

Observed ethtool(const Root& root, const ChangeRecord& r, EthtoolPort* port, const std::string& noEthtool) {
  auto index = readValue(root, "/sys/class/net/" + r.object + "/ifindex", "interface " + r.object + " is gone");
  if (index.state != Observed::State::Value) return index;
  if (port == nullptr) return unreadable(noEthtool);
  int ifindex = 0;
  try {
    ifindex = std::stoi(std::string(core::trim(index.value)));
  } catch (const std::exception&) {
    return unreadable("/sys/class/net/" + r.object + "/ifindex reads '" + std::string(core::trim(index.value)) + "'");
  }
  auto now = port->get(ifindex, r.kind, r.key);
  if (!now) return unreadable(now.error().describe());
  const core::EthtoolKey* k = ethtoolKeyOf(r.kind, r.key);
  return value(k != nullptr ? core::formatEthtoolValue(k->type, *now) : std::to_string(*now));
}

Observed observe(const Root& root, const ChangeRecord& r, EthtoolPort* port, const std::string& noEthtool) {
  switch (r.kind) {
    case ChangeKind::Domain:
      if (deviceGone(root, r)) return gone("device " + r.device + " was removed");
      if (!r.group) return unreadable("the record names no group");
      return readValue(root, "/sys/kernel/iommu_groups/" + std::to_string(*r.group) + "/type",
                       "group " + std::to_string(*r.group) + " is gone");
    case ChangeKind::ModuleParam:
      return readValue(root, moduleParamPath(r.object),
                       "module " + r.object.substr(0, r.object.find('.')) + " is not loaded");
    case ChangeKind::ModprobeConf: return readValue(root, r.object, r.object + " was removed");
    case ChangeKind::Rings:
    case ChangeKind::Channels:
    case ChangeKind::Coalesce:
      if (deviceGone(root, r)) return gone("device " + r.device + " was removed");
      return ethtool(root, r, port, noEthtool);
  }
  return unreadable("an unknown kind of record");
}

}  // namespace

std::vector<Observed> observeRecords(const Root& root, const std::vector<ChangeRecord>& records, EthtoolPort* ethtool,
                                     const std::string& noEthtool) {
  std::vector<Observed> out;
  out.reserve(records.size());
  for (const auto& r : records) out.push_back(observe(root, r, ethtool, noEthtool));
  return out;
}

std::string moduleParamPath(const std::string& object) {
  auto dot = object.find('.');
  return "/sys/module/" + object.substr(0, dot) + "/parameters/" + object.substr(dot + 1);
}

const core::EthtoolKey* ethtoolKeyOf(ChangeKind kind, const std::string& key) {
  const auto& keys = kind == ChangeKind::Rings      ? core::ringKeys()
                     : kind == ChangeKind::Channels ? core::channelKeys()
                                                    : core::coalesceKeys();
  return core::findEthtoolKey(keys, key);
}

}  // namespace iommud::app
