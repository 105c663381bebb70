#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/mode.hpp"
#include "core/names.hpp"

namespace iommud::core {

/// One host protection, read from the state in effect (docs/kernel.md §5, §11).
struct Protection {
  enum class State { On, Off, Weakened, NotApplicable, Unknown };
  // "pre-boot-dma", "interrupt-remapping", "x2apic", "host-translation", "acs-isolation", and on
  // arm64 "msi-isolation"
  std::string id;
  State state = State::Unknown;
  std::string text;    // what is the case and what it means
  std::string advice;  // what to do; empty when nothing is needed
};
inline constexpr Names<Protection::State, 5> kProtectionStateNames{
    {{Protection::State::On, "on"},
     {Protection::State::Off, "off"},
     {Protection::State::Weakened, "weakened"},
     {Protection::State::NotApplicable, "not-applicable"},
     {Protection::State::Unknown, "unknown"}}};
static_assert(checkNames(kProtectionStateNames, Protection::State::Unknown));
std::string_view toString(Protection::State state);

/// Why the devices of one group share it: the functions on their paths to the root whose ACS
/// does not isolate (docs/kernel.md §11.3).
struct SharedGroup {
  int group = 0;
  std::vector<std::string> withoutAcs;  // bridges and functions whose ACS does not isolate
  std::vector<std::string> unknown;     // config space not readable (not root)
  std::string text;
};

/// Whether a group can be given to a VM with vfio-pci, and what blocks it.
struct VfioReadiness {
  int group = 0;
  bool viable = false;                // every device bound to vfio-pci, pcieport or nothing, MSIs isolated
  std::vector<std::string> blockers;  // "0000:01:00.1 is bound to snd_hda_intel", ...
};

struct Protections {
  std::vector<Protection> host;
  std::vector<SharedGroup> shared;
  std::vector<VfioReadiness> vfio;  // groups with at least one endpoint
};

/// The protection that keeps a device from raising another's interrupts: interrupt remapping on
/// x86, msi-isolation on arm64 (docs/score.md). Null only if `p` lacks it.
const Protection* interruptIsolation(const HostFacts& host, const Protections& p);

/// Everything above, from the host facts and the derived mode.
Protections protections(const HostFacts& host, const HostMode& mode);

}  // namespace iommud::core
