#pragma once

#include <string_view>

#include "core/names.hpp"

namespace iommud::core {

/// The CPU architecture the running kernel was built for. It decides which IOMMU parameters the
/// kernel's command line has at all (docs/kernel.md §1.5): x86's `iommu=` and the VT-d and AMD
/// drivers' `intel_iommu=`/`amd_iommu=` do not exist on arm64, where the generic `iommu.*` are all.
enum class Arch { Unknown, X86, Arm64, Other };
inline constexpr Names<Arch, 4> kArchNames{
    {{Arch::Unknown, "unknown"}, {Arch::X86, "x86"}, {Arch::Arm64, "arm64"}, {Arch::Other, "other"}}};
static_assert(checkNames(kArchNames, Arch::Other));
std::string_view toString(Arch arch);  // "unknown", "x86", "arm64", "other"

/// The kernel's machine name (`uname -m`, /proc/sys/kernel/arch): "x86_64", "i686" -> X86,
/// "aarch64" -> Arm64, any other name -> Other, "" -> Unknown.
Arch archFromMachine(std::string_view machine);

}  // namespace iommud::core
