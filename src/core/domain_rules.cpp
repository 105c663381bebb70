#include "core/domain_rules.hpp"

#include <algorithm>
#include <array>
#include <cerrno>

namespace iommud::core {

namespace {

// Newest first; docs/kernel.md §2.1 gives the commits each row was read from.
const std::array<DomainRules, 4> kRules{{
    // 6.4: 49a22aae7d9c "iommu: Replace device_lock() with group->mutex" moved the live path first,
    // dropped the one-device limit and checks group->owner_cnt (-EPERM) instead of device_is_bound().
    {KernelVersion{6, 4, 0}, true, true, true, true, true, EPERM},
    // 5.15: 452e69b58c28 "iommu: Allow enabling non-strict mode dynamically": "DMA-FQ", and the
    // live path, reached only after the one-device, bound-driver and def_domain_type checks.
    {KernelVersion{5, 15, 0}, true, true, false, false, false, EBUSY},
    // 5.11: 08a27c1c3ecf "iommu: Add support to change default domain of an iommu group".
    {KernelVersion{5, 11, 0}, true, false, false, false, false, EBUSY},
    {KernelVersion{0, 0, 0}, false, false, false, false, false, EACCES},
}};

// sysfs_streq(): equal, but for one trailing newline on either side.
std::string_view streq(std::string_view s) {
  if (s.ends_with('\n')) s.remove_suffix(1);
  return s;
}

// The kernel's req_type: a type, or none for "auto" (resolved per device); parsed = false: -EINVAL.
struct Request {
  bool parsed = false;
  std::optional<DomainType> type;
};

Request parseRequest(const DomainRules& rules, std::string_view text) {
  auto t = streq(text);
  if (t == "identity") return {true, DomainType::Identity};
  if (t == "DMA") return {true, DomainType::Dma};
  if (t == "DMA-FQ" && rules.dmaFq) return {true, DomainType::DmaFq};
  if (t == "auto") return {true, std::nullopt};
  return {};
}

TypeWriteVerdict refuse(TypeWriteCheck check, int error, const GroupAtWrite& g) {
  return TypeWriteVerdict{check, error, g.current, false};
}

bool anyBound(const DomainRules& rules, const GroupAtWrite& g) {
  return std::any_of(g.members.begin(), g.members.end(), [&](const GroupAtWrite::Member& m) {
    return m.driver && (!rules.managedDmaStaysBound || mustUnbind(rules, *m.driver));
  });
}

// iommu_get_def_domain_type() over the group: untrusted devices get DMA only (28b41e2c6aeb, 5.11),
// a driver's def_domain_type its type. A request that differs is refused; "auto" takes it.
std::optional<DomainType> resolve(const GroupAtWrite& g, std::optional<DomainType> req, bool& forbidden) {
  std::optional<DomainType> need;
  for (const auto& m : g.members) {
    if (m.untrusted) need = DomainType::Dma;
    if (m.required && !need) need = m.required;
  }
  if (!req) return need.value_or(g.bootDefault);
  forbidden = need && *need != *req;
  return req;
}

}  // namespace

const DomainRules& domainRules(const std::optional<KernelVersion>& version) {
  if (!version) return kRules.front();
  for (const auto& r : kRules) {
    if (*version >= r.since) return r;
  }
  return kRules.back();
}

bool mustUnbind(const DomainRules& rules, std::string_view driver) {
  bool managesDma = driver == "pcieport" || driver == "pci-stub";
  return !(rules.managedDmaStaysBound && managesDma);
}

TypeWriteVerdict judgeTypeWrite(const DomainRules& rules, const GroupAtWrite& g, std::string_view text) {
  using C = TypeWriteCheck;
  if (!rules.writable) return refuse(C::ReadOnly, EACCES, g);
  if (!g.capable) return refuse(C::NoCapability, EACCES, g);
  if (!g.current) return refuse(C::NoDefaultDomain, EINVAL, g);
  auto req = parseRequest(rules, text);
  if (!req.parsed) return refuse(C::UnknownType, EINVAL, g);
  const bool liveRequest = req.type == DomainType::DmaFq && *g.current == DomainType::Dma;
  if (rules.liveFirst && liveRequest) return TypeWriteVerdict{C::Taken, 0, DomainType::DmaFq, true};
  if (!rules.multiDevice && g.members.size() != 1) return refuse(C::SeveralDevices, EINVAL, g);
  if (rules.liveFirst && g.members.empty()) return refuse(C::DriverBound, EPERM, g);
  // Before 6.4 the live request is exempt from the bound check only.
  if (!(liveRequest && !rules.liveFirst) && anyBound(rules, g)) return refuse(C::DriverBound, rules.boundErrno, g);
  bool forbidden = false;
  auto type = resolve(g, req.type, forbidden);
  if (forbidden) return refuse(C::DeviceForbids, EINVAL, g);
  if (*type == *g.current) return TypeWriteVerdict{C::Taken, 0, type, false};
  return TypeWriteVerdict{C::Taken, 0, type, liveRequest};
}

TypeChangeWay typeChangeWay(const DomainRules& rules, const GroupAtWrite& group, DomainType to) {
  const std::string text(toString(to));
  TypeChangeWay way{judgeTypeWrite(rules, group, text), false};
  if (way.verdict.check != TypeWriteCheck::DriverBound) return way;
  GroupAtWrite unbound = group;
  for (auto& m : unbound.members) {
    if (m.driver && mustUnbind(rules, *m.driver)) m.driver.reset();
  }
  return TypeChangeWay{judgeTypeWrite(rules, unbound, text), true};
}

std::string describeCheck(const TypeWriteVerdict& verdict) {
  std::string_view check;
  switch (verdict.check) {
    case TypeWriteCheck::Taken: return {};
    case TypeWriteCheck::ReadOnly: check = "before 5.11 the group type is read-only"; break;
    case TypeWriteCheck::NoCapability: check = "the writer lacks CAP_SYS_ADMIN or CAP_SYS_RAWIO"; break;
    case TypeWriteCheck::NoDefaultDomain: check = "the group has no default domain"; break;
    case TypeWriteCheck::UnknownType: check = "the kernel does not know the type (DMA-FQ came in 5.15)"; break;
    case TypeWriteCheck::SeveralDevices: check = "before 6.4 a group of several devices cannot change type"; break;
    case TypeWriteCheck::DriverBound: check = "a driver is still bound to a device of the group"; break;
    case TypeWriteCheck::DeviceForbids: check = "a device of the group is untrusted or needs another type"; break;
  }
  std::string_view name;
  switch (verdict.error) {
    case EACCES: name = "EACCES"; break;
    case EBUSY: name = "EBUSY"; break;
    case EINVAL: name = "EINVAL"; break;
    case EPERM: name = "EPERM"; break;
    default: return std::string(check) + ": errno " + std::to_string(verdict.error);
  }
  return std::string(check) + ": " + std::string(name);
}

std::string describeRefusal(const TypeWriteVerdict& verdict, int group, size_t devices, DomainType to,
                            const std::optional<KernelVersion>& version) {
  const std::string kernel = version ? " (this kernel is " + version->str() + ")" : std::string();
  const std::string target(toString(to));
  switch (verdict.check) {
    case TypeWriteCheck::Taken: return {};
    case TypeWriteCheck::ReadOnly: return "the group type is read-only before Linux 5.11" + kernel;
    case TypeWriteCheck::NoCapability: return "the write needs CAP_SYS_ADMIN and CAP_SYS_RAWIO";
    case TypeWriteCheck::NoDefaultDomain: return "the group has no default domain";
    case TypeWriteCheck::UnknownType:
      if (to == DomainType::DmaFq) return "DMA-FQ exists only since Linux 5.15" + kernel;
      return target + " is not a type the kernel takes";
    case TypeWriteCheck::SeveralDevices:
      return "group " + std::to_string(group) + " holds " + std::to_string(devices) +
             " devices, and only Linux 6.4 and later change the type of a group of several devices" +
             (to == DomainType::DmaFq ? std::string(", not even DMA -> DMA-FQ, which is otherwise made with the "
                                                    "drivers bound: the kernel checks the device count first")
                                      : std::string()) +
             kernel;
    case TypeWriteCheck::DriverBound: return "a driver is still bound to a device of the group";
    case TypeWriteCheck::DeviceForbids:
      return "a device of the group is untrusted, or its IOMMU driver requires another type than " + target;
  }
  return {};
}

}  // namespace iommud::core
