#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/names.hpp"

namespace iommud::core {

/// One step in explaining the IOMMU mode: where a setting came from and what it did.
struct Reason {
  // Group, Device and Iommud appear only in a device's exposure (core/exposure.hpp).
  enum class Source { Firmware, Config, Cmdline, Driver, Runtime, Inferred, Group, Device, Iommud };
  Source source;
  std::string text;
};
inline constexpr Names<Reason::Source, 9> kReasonSourceNames{{{Reason::Source::Firmware, "firmware"},
                                                              {Reason::Source::Config, "config"},
                                                              {Reason::Source::Cmdline, "cmdline"},
                                                              {Reason::Source::Driver, "driver"},
                                                              {Reason::Source::Runtime, "runtime"},
                                                              {Reason::Source::Inferred, "inferred"},
                                                              {Reason::Source::Group, "group"},
                                                              {Reason::Source::Device, "device"},
                                                              {Reason::Source::Iommud, "iommud"}}};
static_assert(checkNames(kReasonSourceNames, Reason::Source::Iommud));
std::string_view toString(Reason::Source source);

/// The host-wide IOMMU mode, and the chain of reasons behind it.
struct HostMode {
  bool present = false;
  Vendor vendor = Vendor::None;
  /// What the kernel chose at boot (its "Default domain type" and "TLB invalidation policy"
  /// lines): from the config default and the command line. nullopt when no IOMMU or unknowable.
  std::optional<bool> passthrough;
  std::optional<bool> strict;
  /// The default domain trusted devices end up with after drivers had their say (VT-d caching
  /// mode forces strict, missing pass-through support forbids identity). nullopt when off.
  std::optional<DomainType> defaultType;
  std::vector<Reason> reasons;
  /// Why a group's type differs from the default, by group id.
  std::map<int, std::vector<std::string>> groupNotes;

  /// "off", "identity", "DMA", "DMA-FQ", or "unknown".
  [[nodiscard]] std::string modeName() const;
};

/// Derives the mode from config defaults, the command line, driver constraints and the runtime
/// group types, in the order the kernel applies them.
HostMode deriveMode(const HostFacts& host);

}  // namespace iommud::core
