#pragma once

#include <optional>
#include <string>

#include "core/domain_rules.hpp"
#include "core/host.hpp"

namespace iommud::core {

/// Why a group's default domain may not change to a type: iommud's safety rules
/// (docs/CONVENTIONS.md §7), which no policy overrides, and what the running kernel refuses.
enum class DomainRefusal {
  NoDefaultDomain,  // the type is unreadable, unknown, or not a default domain iommud may change
  Untrusted,        // identity or DMA-FQ for an untrusted device (removable, behind a tunnel)
  NoPassThrough,    // identity where a VT-d unit lacks ecap.PT
  KernelRule,       // this kernel's iommu_group_store_type() refuses it (docs/kernel.md §2.2)
  DeviceForbids,    // the kernel refuses the type for a device of the group (its trust or driver)
  InUse,            // a device that must be unbound for the write is in use
  NeverUnbind,      // a device that must be unbound is bound to vfio-pci or an SR-IOV PF with VFs
};

/// The verdict on changing a group to a type, judged on facts of the host: allowed (and how the
/// kernel takes it), or the first refusal in the order the planner reports them (untrusted,
/// ecap.PT, the kernel's rules, in use), with its words.
struct DomainSafety {
  std::optional<DomainRefusal> refusal;
  TypeChangeWay way;                  // how the write is made: live, or after unbinding (when judged)
  const PciDevice* device = nullptr;  // the device an Untrusted, InUse or NeverUnbind refusal names
  std::string message;                // the refusal in words, for people; empty when allowed

  [[nodiscard]] bool allowed() const { return !refusal; }
};

/// The one predicate for a domain-type change, which the planner and the transaction's preflight
/// both call: `host` holds the group's devices, drivers, trust and use, `to` the resolved type.
DomainSafety judgeDomainChange(const HostFacts& host, const Group& group, DomainType to);

/// Whether a member of the group must let go of it before the write (`way` not live): bound to
/// a driver that holds DMA ownership on this kernel (docs/kernel.md §2.2).
bool unbindsFor(const DomainRules& rules, const TypeChangeWay& way, const PciDevice& device);

/// "nvme0 (0000:01:00.0): nvme0n1p2 is mounted at /": a device's first reason to be in use.
std::string inUseWhy(const PciDevice& device);

}  // namespace iommud::core
