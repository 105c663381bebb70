#include "core/plan/context.hpp"

#include "core/cmdline.hpp"

namespace iommud::core::planning {

HostCtx hostContext(const PlanInput& in) {
  HostCtx h;
  h.vendor = in.host.iommuPresent() ? in.host.vendor() : Vendor::None;
  h.mode = in.mode.modeName();
  for (const auto& u : in.host.units) {
    if (u.intel) {
      h.cachingMode = h.cachingMode || u.intel->cachingMode();
      h.rwbf = h.rwbf || u.intel->rwbf();
    }
    if (u.amd) h.npCache = h.npCache || u.amd->npCache();
  }
  h.version = in.host.kernel.upstream.version;
  for (const auto& p : parseCmdline(in.host.kernel.cmdline)) {
    h.cmdlineKeys.insert(p.key);
    h.cmdlineParams.insert(p.value ? p.key + "=" + *p.value : p.key);
  }
  for (const auto& f : in.findings) {
    auto& s = h.findings[f.id];
    s.hostWide = s.hostWide || (f.groups.empty() && f.devices.empty());
    s.groups.insert(f.groups.begin(), f.groups.end());
    s.devices.insert(f.devices.begin(), f.devices.end());
  }
  return h;
}

DeviceCtx deviceContext(const PciDevice& d, const GroupCtx* g) {
  DeviceCtx c;
  c.dev = &d;
  c.kind = d.kind();
  c.group = g;
  if (d.driver) c.driverName = *d.driver;
  c.addressName = d.address;
  if (!d.netdevs.empty() || !d.nvme.empty()) c.names.reserve(d.netdevs.size() + d.nvme.size());
  for (const auto& n : d.netdevs) c.names.emplace_back(n.name);
  for (const auto& n : d.nvme) c.names.emplace_back(n.name);
  if (g != nullptr) {
    c.groupSize = static_cast<int>(g->endpoints.size());
    for (const auto* o : g->endpoints) {
      if (o != &d) c.otherKinds |= kindBit(o->kind());
    }
  }
  return c;
}

}  // namespace iommud::core::planning
