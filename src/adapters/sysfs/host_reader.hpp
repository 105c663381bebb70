#pragma once

#include <optional>
#include <string>

#include "adapters/sysfs/root.hpp"
#include "core/host.hpp"

namespace iommud::adapters::sysfs {

/// Reads the host's IOMMU state, PCI devices and their use from /sys and /proc under a root.
/// Fails only when the root does not look like a host at all; files that exist but cannot be
/// read (not root) are listed in HostFacts::unreadable, and missing optional files are normal.
/// The modules of the bound drivers are read too (see readModule).
///
/// `boot`, for a reader that stays (the daemon's worker, between hotplug batches): what cannot
/// change before the machine boots again, the kernel's facts (/proc/version, the command line, the
/// kernel's config, which /proc/config.gz holds compressed) and the firmware's ACPI tables, kept
/// from the first read that read them whole and taken from there after, while the kernel's
/// release (read every time: it says the root still answers) reads the same.
struct BootFacts {
  std::string release;                     // the kernel release they were read under
  std::optional<core::KernelInfo> kernel;  // as read before the architecture is derived
  std::optional<core::Firmware> firmware;
};
core::Result<core::HostFacts> readHost(const Root& root, BootFacts* boot = nullptr);

/// `planned` with IOMMU group `id` read again from sysfs just before a change acts on it: its type
/// and members, each member's driver, trust and SR-IOV state, and trust and use judged again
/// (a driver now vfio-pci, VFs enabled, a new member). What the group's read does not cover
/// (mounts, routes, netdevs, NVMe) stays as planned. A group gone from sysfs is left out.
core::HostFacts rereadGroup(const Root& root, core::HostFacts planned, int id);

/// Reads a module's parameters from /sys/module/<name>/parameters and the options iommud's own
/// /etc/modprobe.d/iommud-<name>.conf sets; a module that is not loaded comes back with loaded=false.
core::Module readModule(const Root& root, const std::string& name);

}  // namespace iommud::adapters::sysfs
