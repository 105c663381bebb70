#pragma once

#include <string>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "app/change/ethtool_port.hpp"
#include "app/host/verify.hpp"

namespace iommud::app {

/// What the host shows now for each record (verifyRecords' input, in the same order): a group's
/// domain type, a module parameter and a modprobe.d file from `root`; a NIC's rings, channels and
/// coalescing over `ethtool`, unreadable without it (`noEthtool` says why: under --root, or the
/// kernel has no ethtool netlink). A removed device, an unloaded module or a deleted file is gone.
std::vector<Observed> observeRecords(const adapters::sysfs::Root& root, const std::vector<ChangeRecord>& records,
                                     EthtoolPort* ethtool, const std::string& noEthtool);

/// "nvme.poll_queues" -> "/sys/module/nvme/parameters/poll_queues".
std::string moduleParamPath(const std::string& object);

/// The ethtool key a rings, channels or coalesce record or change names; nullptr if none.
const core::EthtoolKey* ethtoolKeyOf(core::ChangeKind kind, const std::string& key);

}  // namespace iommud::app
