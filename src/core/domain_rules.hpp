#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/kernel_version.hpp"

namespace iommud::core {

/// What one range of kernel versions does with a write of `/sys/kernel/iommu_groups/N/type`: the
/// one table of the domain rules (docs/kernel.md §2.1, §2.2), used by the planner, the
/// transaction's preflight and the tests' fake kernel alike.
struct DomainRules {
  KernelVersion since;
  bool writable = false;     // 5.11 (08a27c1c3ecf): the attribute takes writes; before, it is read-only
  bool dmaFq = false;        // 5.15 (452e69b58c28): "DMA-FQ" is a type, DMA -> DMA-FQ is made with drivers bound
  bool liveFirst = false;    // 6.4 (49a22aae7d9c): the live path comes before every other check of the group
  bool multiDevice = false;  // 6.4: a group of several devices may change (before: EINVAL, checked first)
  bool managedDmaStaysBound = false;  // 6.4: "bound" is group->owner_cnt, which pcieport and pci-stub
                                      // (driver_managed_dma, 5.19) do not raise; before, device_is_bound()
  int boundErrno = 0;                 // a driver still bound: EBUSY (5.11-6.3) or EPERM (6.4+)
};

/// The rules of `version`. An unknown version gets the newest rules: a wrong guess makes the
/// kernel refuse the write, and the transaction rolls back.
const DomainRules& domainRules(const std::optional<KernelVersion>& version);

/// Whether a bound `driver` must be unbound before a type write that is not the live one.
bool mustUnbind(const DomainRules& rules, std::string_view driver);

/// A group as iommu_group_store_type() sees it at the moment of a write.
struct GroupAtWrite {
  struct Member {
    std::optional<std::string> driver;   // bound driver, if any
    bool untrusted = false;              // the kernel allows it only DMA
    std::optional<DomainType> required;  // the IOMMU driver's def_domain_type for it
  };
  std::optional<DomainType> current;  // the default domain's type; nullopt: none
  std::vector<Member> members;
  bool capable = true;                       // CAP_SYS_ADMIN and CAP_SYS_RAWIO
  DomainType bootDefault = DomainType::Dma;  // what "auto" gives a device without requirements
};

/// The check of iommu_group_store_type() that refused a write, or Taken.
enum class TypeWriteCheck {
  Taken,            // written (or already the type: no-op)
  ReadOnly,         // before 5.11 (EACCES at open)
  NoCapability,     // EACCES
  NoDefaultDomain,  // EINVAL
  UnknownType,      // not a type this kernel parses (DMA-FQ before 5.15): EINVAL
  SeveralDevices,   // before 6.4, a group of more than one device: EINVAL, checked before the live path
  DriverBound,      // EBUSY (5.11-6.3) / EPERM (6.4+)
  DeviceForbids,    // an untrusted device, or one whose IOMMU driver requires another type: EINVAL
};

/// The kernel's answer to one write of `text` to a group's `type`.
struct TypeWriteVerdict {
  TypeWriteCheck check = TypeWriteCheck::Taken;
  int error = 0;                     // errno; 0 when taken
  std::optional<DomainType> result;  // the type afterwards
  bool live = false;                 // taken by the live DMA -> DMA-FQ path (drivers stay bound)

  [[nodiscard]] bool taken() const { return check == TypeWriteCheck::Taken; }
};

/// iommu_group_store_type() of `rules`' versions, check by check in the kernel's order.
TypeWriteVerdict judgeTypeWrite(const DomainRules& rules, const GroupAtWrite& group, std::string_view text);

/// How a change of a group to `to` can be made on this kernel: live (drivers stay bound), after
/// unbinding the drivers that hold the group, or not at all (the refusing check).
struct TypeChangeWay {
  TypeWriteVerdict verdict;  // the write as it would be made (after the unbinds, if any)
  bool unbindFirst = false;
};

/// Judges the change once with every driver bound (the live path, or nothing to unbind) and, if
/// bound drivers are all that stand in the way, again with those mustUnbind() names unbound.
TypeChangeWay typeChangeWay(const DomainRules& rules, const GroupAtWrite& group, DomainType to);

/// The check that refused a write and its errno, in words: "before 6.4 a group of several devices
/// cannot change type: EINVAL"; empty when taken.
std::string describeCheck(const TypeWriteVerdict& verdict);

/// A refusal in words, for a group of `devices` on `version` (nullopt: unknown).
std::string describeRefusal(const TypeWriteVerdict& verdict, int group, size_t devices, DomainType to,
                            const std::optional<KernelVersion>& version);

}  // namespace iommud::core
