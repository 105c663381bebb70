#pragma once

#include "adapters/sysfs/root.hpp"
#include "core/host.hpp"

namespace iommud::adapters::sysfs {

/// Reads the host's IOMMU state, PCI devices and their use from /sys and /proc under a root.
/// Fails only when the root does not look like a host at all; files that exist but cannot be
/// read (not root) are listed in HostFacts::unreadable, and missing optional files are normal.
core::Result<core::HostFacts> readHost(const Root& root);

}  // namespace iommud::adapters::sysfs
