#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/domain_rules.hpp"
#include "core/host.hpp"
#include "core/kernel_version.hpp"
#include "core/result.hpp"

namespace iommud::core {

/// One device of a group during a domain-type change: the driver it had, and whether it must let go.
struct MemberStep {
  std::string address;
  std::optional<std::string> driver;
  bool unbind = false;  // holds DMA ownership of the group: unbound before the write, rebound after

  bool operator==(const MemberStep&) const = default;
};

/// A group default-domain change checked against the host as it is now: what to unbind, write
/// and rebind. Nothing in it has happened yet.
struct DomainChange {
  int group = 0;
  DomainType from = DomainType::Unknown;
  DomainType to = DomainType::Unknown;
  bool live = false;  // DMA -> DMA-FQ with drivers bound: no unbind, undone only by unbind or reboot
  std::vector<MemberStep> members;

  [[nodiscard]] bool noop() const { return from == to; }
};

/// Checks a change of group `id` to `to` against fresh host facts and says what it takes, or
/// refuses with the reason: a device in use, vfio-pci or an SR-IOV PF with VFs (never unbound), an
/// untrusted device (never identity or lazy), no pass-through support, or what this kernel allows.
/// Preflight refuses rather than start what cannot finish.
Result<DomainChange> prepareDomainChange(const HostFacts& host, int id, DomainType to);

/// The group as the kernel would see it at a write: its type and each device's driver and trust
/// (facts read by iommud; a driver's def_domain_type is not among them, so the write still judges).
GroupAtWrite groupAtWrite(const HostFacts& host, const Group& group);

/// The kernel's answer to a write of `type`, explained for this kernel version (docs/kernel.md §2.2):
/// EPERM on 6.4+ and EBUSY on 5.11-6.3 mean a driver is still bound, EINVAL means a device of the
/// group (or its trust status) forbids the type, or (before 6.4) that the group has several devices.
std::string explainTypeWriteError(int error, const std::optional<KernelVersion>& version, size_t groupDevices);

}  // namespace iommud::core
