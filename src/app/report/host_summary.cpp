#include "app/report/host_summary.hpp"

namespace iommud::app {

namespace bus = adapters::dbus;

bus::HostSummary hostSummaryOf(const Status& status, const std::vector<ChangeRecord>& records) {
  bus::HostSummary view;
  view.vendor = std::string(core::toString(status.mode.vendor));
  view.mode = status.mode.modeName();
  for (const auto& g : status.host.groups) {
    view.groups.push_back({g.id, g.type ? std::string(core::toString(*g.type)) : "unknown", g.devices});
  }
  for (const auto& d : status.host.devices) {
    std::string name = d.displayName();
    view.devices.push_back({d.address, name == d.address ? "" : bus::oneLine(name), bus::oneLine(d.driver.value_or("")),
                            d.group ? *d.group : -1, d.untrusted()});
  }
  for (const auto& f : status.findings) {
    view.findings.push_back({f.id, std::string(core::toString(f.severity)), bus::oneLine(f.title)});
  }
  for (const auto& c : records) {
    view.changes.push_back({c.time, bus::oneLine(c.device), bus::oneLine(c.object), bus::oneLine(c.key),
                            bus::oneLine(c.original), bus::oneLine(c.written), bus::oneLine(c.rule)});
  }
  return view;
}

}  // namespace iommud::app
