#include "app/host/status.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/protections.hpp"

namespace iommud::app {

using namespace core;  // NOLINT(google-build-using-namespace): the host model's own vocabulary

Status buildStatus(HostFacts host) {
  Status s;
  s.mode = deriveMode(host);
  s.findings = findings(host, s.mode);
  s.host = std::move(host);
  return s;
}

std::vector<DeviceExposure> exposuresOf(const Status& status) {
  std::vector<DomainChangeMade> made;
  for (const auto& c : status.changes) {
    if (c.kind == ChangeKind::Domain && c.group) made.push_back({*c.group, c.original, c.written, c.rule, c.ruleWhere});
  }
  return exposures(status.host, status.mode, made);
}

core::Score scoreOf(const Status& status) {
  return score(status.host, exposuresOf(status), protections(status.host, status.mode));
}

std::string exposureSummary(const HostFacts& host, const std::vector<DeviceExposure>& exposures) {
  auto all = reachAllMemory(host, exposures);
  if (all.empty()) return "no device can reach all memory";
  std::vector<std::string> names;
  names.reserve(all.size());
  for (const auto& a : all) names.push_back(host.device(a)->displayName());
  return fmt::format("{} device{} can reach all memory: {}", all.size(), all.size() == 1 ? "" : "s",
                     fmt::join(names, ", "));
}

std::vector<const Finding*> findingsConcerning(const Status& status, const PciDevice& d) {
  std::vector<const Finding*> out;
  for (const auto& f : status.findings) {
    bool touches = (f.groups.empty() && f.devices.empty()) ||
                   std::find(f.devices.begin(), f.devices.end(), d.address) != f.devices.end() ||
                   (d.group && std::find(f.groups.begin(), f.groups.end(), *d.group) != f.groups.end());
    if (touches) out.push_back(&f);
  }
  return out;
}

const PciDevice* findDevice(const HostFacts& host, const std::string& name) {
  if (const auto* d = host.device(name)) return d;
  // "3d:00.0" means domain 0000.
  if (const auto* d = host.device("0000:" + name)) return d;
  for (const auto& d : host.devices) {
    for (const auto& n : d.netdevs) {
      if (n.name == name) return &d;
    }
    for (const auto& c : d.nvme) {
      if (c.name == name) return &d;
      for (const auto& ns : c.namespaces) {
        if (ns.disk.name == name) return &d;
      }
    }
  }
  return nullptr;
}

}  // namespace iommud::app
