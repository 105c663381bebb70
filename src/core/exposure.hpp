#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/mode.hpp"
#include "core/names.hpp"

namespace iommud::core {

/// What memory a device's DMA can reach, from the state in effect (docs/kernel.md §1.2, §5).
enum class Exposure {
  AllMemory,      // no translation: IOMMU off or absent, the group in identity, outside any group but on SMMUs
  MappedWindow,   // translated with lazy invalidation (DMA-FQ): mapped buffers, and for a while after unmap
  Mapped,         // translated with strict invalidation (DMA): mapped buffers only
  MappedSubPage,  // strict and bounced (an untrusted device): mapped buffers, never their neighbours in a page
  None,           // no DMA at all: a blocking domain, a stream the SMMU aborts, not a DMA master
  Unknown,        // the group's type could not be read, or is not a default domain this version knows
};
inline constexpr Names<Exposure, 6> kExposureNames{{{Exposure::AllMemory, "all-memory"},
                                                    {Exposure::MappedWindow, "mapped-window"},
                                                    {Exposure::Mapped, "mapped"},
                                                    {Exposure::MappedSubPage, "mapped-subpage"},
                                                    {Exposure::None, "none"},
                                                    {Exposure::Unknown, "unknown"}}};
static_assert(checkNames(kExposureNames, Exposure::Unknown));
/// "all-memory", "mapped-window", "mapped", "mapped-subpage", "none", "unknown".
std::string_view toString(Exposure exposure);
/// A sentence fragment for people: "can reach all memory", ...
std::string_view describe(Exposure exposure);

/// Whether the function can initiate DMA at all, from its class code: a host bridge cannot.
bool dmaMaster(const PciDevice& d);

/// What a device in a group of this default domain type can reach; nullopt for types that are
/// no default domain (unmanaged, unknown).
std::optional<Exposure> exposureOfType(DomainType type, bool untrusted);
/// Whether `to` lets a device reach more than `from` (none < mapped-subpage < mapped <
/// mapped-window < all-memory; unknown is never wider).
bool wider(Exposure to, Exposure from);

/// A domain type iommud wrote to a group, and by which rule (from its change records).
struct DomainChangeMade {
  int group = 0;
  std::string from;
  std::string to;
  std::string rule;
  std::string ruleWhere;
};

/// One device's exposure and the chain of reasons that led to it, outermost first.
struct DeviceExposure {
  std::string address;
  Exposure level = Exposure::Unknown;
  std::vector<Reason> reasons;
};

/// The exposure of every PCI function, in the order of host.devices. Bridges are included (a
/// bridge can master DMA too), but `reachAllMemory` leaves them out.
std::vector<DeviceExposure> exposures(const HostFacts& host, const HostMode& mode,
                                      const std::vector<DomainChangeMade>& changes);

/// The addresses of the endpoints (not bridges) that can reach all memory.
std::vector<std::string> reachAllMemory(const HostFacts& host, const std::vector<DeviceExposure>& exposures);

}  // namespace iommud::core
