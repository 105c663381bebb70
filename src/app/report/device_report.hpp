#pragma once

#include <string>
#include <vector>

#include "app/host/status.hpp"
#include "app/report/text_style.hpp"
#include "core/plan.hpp"

namespace iommud::app {

/// Everything `iommuctl status DEVICE` says of one device, gathered from the status and the
/// policies' verdicts on it (core::evaluateRules); pointers into both, which must outlive it.
struct DeviceView {
  const core::PciDevice* device = nullptr;
  const core::Group* group = nullptr;              // nullptr: outside any group, not translated
  const core::DeviceExposure* exposure = nullptr;  // nullptr for a device exposuresOf does not list
  std::vector<const core::Finding*> findings;      // findingsConcerning: measured ones included
  std::vector<const core::RuleEvaluation*> rules;  // those that match it
  std::vector<const ChangeRecord*> changes;        // iommud's records of it or of its group, oldest first
};

/// The view of `device` (one of status.host.devices); `exposures` is exposuresOf(status).
DeviceView deviceView(const Status& status, const core::PciDevice& device,
                      const std::vector<core::DeviceExposure>& exposures,
                      const std::vector<core::RuleEvaluation>& evaluations);

/// The names of this host's devices (addresses, netdevs, NVMe controllers and disks) nearest to a
/// name that is none of them, all those equally near; empty when none is near (core::editDistance).
std::vector<std::string> nearestDeviceNames(const core::HostFacts& host, const std::string& name);

/// `iommuctl status DEVICE`. `rulesKnown` false: the policies could not be read, so no rule is said
/// to match.
std::string deviceText(const Status& status, const DeviceView& view, bool rulesKnown, bool color,
                       size_t width = kTextWidth);
/// `iommuctl status DEVICE --json` (docs/schema/device.schema.json), newline-terminated.
std::string deviceJson(const Status& status, const DeviceView& view, bool rulesKnown);

}  // namespace iommud::app
