#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "adapters/sysfs/host_reader.hpp"
#include "adapters/sysfs/root.hpp"
#include "adapters/sysfs/writer.hpp"
#include "app/change/domain_transaction.hpp"
#include "app/change/ethtool_port.hpp"
#include "app/change/outcome.hpp"
#include "app/change/state_paths.hpp"
#include "app/host/change_record.hpp"
#include "core/plan.hpp"

namespace iommud::app {

/// What apply and revert work with: the host's root, the writer in front of the kernel, ethtool
/// (nullptr: NIC settings are planned, not made, as under --root), the state paths, the clock.
struct ApplyContext {
  const adapters::sysfs::Root& root;
  adapters::sysfs::SysfsWriter& writer;
  EthtoolPort* ethtool = nullptr;
  StatePaths paths;
  std::function<std::string()> now;  // UTC time as ISO 8601
  TransactionHooks hooks;
  adapters::sysfs::BootFacts* boot = nullptr;  // a standing reader's (see readHost)
};

/// Applies the plan's changes in apply mode (advice is reported, not made), recording the value
/// each one replaced before making it. The caller holds the writer lock.
std::vector<Outcome> applyPlan(const core::Plan& plan, const core::HostFacts& host, ApplyContext& ctx);

/// Restores what iommud changed (all, or what concerns `device`), newest first, but only where the
/// value is still the one iommud wrote; elsewhere it reports drift and leaves the value alone.
/// With `keptFile` (iommuctl revert --from), a records file kept aside because it was not
/// understood whole: its intact records are reverted too, and the file is renamed *.reverted once
/// none of them is left.
std::vector<Outcome> revertChanges(const std::optional<std::string>& device, const core::HostFacts& host,
                                   ApplyContext& ctx, const std::string& keptFile = "");

/// "options nvme poll_queues=0 ..." with a header saying iommud wrote it and from which rules.
std::string modprobeFileText(const std::string& module, const std::map<std::string, std::string>& options,
                             const std::vector<std::string>& rules);

}  // namespace iommud::app
