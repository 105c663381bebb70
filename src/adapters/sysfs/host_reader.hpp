#pragma once

#include "adapters/sysfs/root.hpp"
#include "core/host.hpp"

namespace iommud::adapters::sysfs {

/// Reads the host's IOMMU state, PCI devices and their use from /sys and /proc under a root.
/// Fails only when the root does not look like a host at all; files that exist but cannot be
/// read (not root) are listed in HostFacts::unreadable, and missing optional files are normal.
/// The modules of the bound drivers are read too (see readModule).
core::Result<core::HostFacts> readHost(const Root& root);

/// Reads a module's parameters from /sys/module/<name>/parameters and the options iommud's own
/// /etc/modprobe.d/iommud-<name>.conf sets; a module that is not loaded comes back with loaded=false.
core::Module readModule(const Root& root, const std::string& name);

}  // namespace iommud::adapters::sysfs
