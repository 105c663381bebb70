#include "core/score.hpp"

#include <algorithm>

namespace iommud::core {
namespace {

std::string names(const HostFacts& h, const std::vector<std::string>& addresses) {
  std::string out;
  for (const auto& a : addresses) {
    const auto* d = h.device(a);
    out += (out.empty() ? "" : ", ") + (d != nullptr ? d->displayName() : a);
  }
  return out;
}

const Protection* protection(const Protections& p, const std::string& id) {
  auto it = std::find_if(p.host.begin(), p.host.end(), [&](const Protection& x) { return x.id == id; });
  return it == p.host.end() ? nullptr : &*it;
}

std::optional<bool> isOn(const Protection* p) {
  if (p == nullptr || p->state == Protection::State::Unknown) return std::nullopt;
  return p->state == Protection::State::On;
}

// Endpoints only: a bridge's exposure is not a device's.
std::vector<std::string> at(const HostFacts& h, const std::vector<DeviceExposure>& all, Exposure level,
                            bool untrustedOnly = false) {
  std::vector<std::string> out;
  for (const auto& e : all) {
    if (e.level != level) continue;  // before the lookup: most devices are not at this level
    const auto* d = h.device(e.address);
    if (d == nullptr || d->kind() == DeviceKind::Bridge) continue;
    if (untrustedOnly && !d->untrusted()) continue;
    out.push_back(e.address);
  }
  return out;
}

// The untrusted devices (bridges aside) that are neither bounced sub-page nor blocked.
std::vector<std::string> untrustedWithoutSubPageIsolation(const HostFacts& h, const std::vector<DeviceExposure>& all) {
  std::vector<std::string> weak;
  for (const auto& e : all) {
    if (e.level == Exposure::MappedSubPage || e.level == Exposure::None) continue;
    const auto* d = h.device(e.address);
    if (d != nullptr && d->kind() != DeviceKind::Bridge && d->untrusted()) weak.push_back(e.address);
  }
  return weak;
}

}  // namespace

Score score(const HostFacts& host, const std::vector<DeviceExposure>& exposures, const Protections& protections) {
  const auto& h = host;
  const auto& all = exposures;
  const auto& p = protections;
  Score s;
  auto add = [&](std::string id, int level, std::optional<bool> met, std::string text) {
    s.criteria.push_back({std::move(id), level, met, std::move(text)});
  };

  // Level 1: every device's DMA is translated.
  auto everything = at(h, all, Exposure::AllMemory);
  add("no-device-reaches-all-memory", 1, everything.empty(),
      everything.empty() ? "every device's DMA is translated"
                         : "these devices can reach all memory: " + names(h, everything));
  auto unknown = at(h, all, Exposure::Unknown);
  add("every-device-judged", 1, unknown.empty(),
      unknown.empty() ? "every device's group type is known" : "no judgement for: " + names(h, unknown));

  // Level 2: what the hardware offers against a hostile device is in force.
  auto weakUntrusted = untrustedWithoutSubPageIsolation(h, all);
  add("untrusted-strict-and-bounced", 2, weakUntrusted.empty(),
      weakUntrusted.empty() ? "every untrusted device is strict and bounced (or there is none)"
                            : "untrusted devices without sub-page isolation: " + names(h, weakUntrusted));
  bool anyUntrusted = std::any_of(h.devices.begin(), h.devices.end(), [](const PciDevice& d) { return d.untrusted(); });
  if (anyUntrusted) {
    std::optional<bool> pool = h.kernel.iommuCmdline.swiotlbNoforce ? std::optional<bool>(false)
                               : h.swiotlb.nslabs                   ? std::optional<bool>(*h.swiotlb.nslabs > 0)
                                                                    : std::nullopt;
    add("bounce-pool-active", 2, pool,
        pool ? (*pool ? "swiotlb has a pool to bounce through" : "no swiotlb pool: untrusted sub-page maps fail")
             : "swiotlb's pool is visible in debugfs only (root)");
  }
  // x86 remaps interrupts, arm64's ITS isolates MSIs: each host is judged by its own.
  const auto* ir = interruptIsolation(h, p);
  add(h.kernel.arch == Arch::Arm64 ? "msi-isolation" : "interrupt-remapping", 2, isOn(ir),
      ir != nullptr ? ir->text : "");
  const auto* acs = protection(p, "acs-isolation");
  add("no-acs-override", 2, acs != nullptr && acs->state != Protection::State::Weakened,
      acs != nullptr ? acs->text : "");

  // Level 3: no window after unmap, and the firmware protected memory before the kernel.
  auto window = at(h, all, Exposure::MappedWindow);
  add("strict-invalidation", 3, window.empty(),
      window.empty() ? "no device keeps a buffer after unmap (no DMA-FQ)"
                     : "lazy invalidation (DMA-FQ) for: " + names(h, window));
  const auto* boot = protection(p, "pre-boot-dma");
  add("pre-boot-dma-protection", 3, isOn(boot), boot != nullptr ? boot->text : "");

  for (int level = 1; level <= 3; ++level) {
    bool met = std::all_of(s.criteria.begin(), s.criteria.end(),
                           [&](const Criterion& c) { return c.level != level || c.met == true; });
    if (!met) break;
    s.level = level;
  }
  return s;
}

}  // namespace iommud::core
