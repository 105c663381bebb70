#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/arch.hpp"

namespace iommud::core {

/// One kernel command-line parameter, as the kernel's next_arg() splits it.
struct CmdlineParam {
  std::string key;
  std::optional<std::string> value;  // nullopt for a bare flag
  std::string text;                  // as written, for messages

  bool operator==(const CmdlineParam&) const = default;
};

/// Splits a command line the way the kernel does: whitespace separates parameters, double
/// quotes may wrap a value or a whole parameter, and "--" ends the kernel's part.
std::vector<CmdlineParam> parseCmdline(std::string_view cmdline);

/// The kernel's kstrtobool(): y/Y/t/T/1, n/N/f/F/0, on/off; anything else is invalid.
std::optional<bool> parseKernelBool(std::string_view s);

/// A problem the kernel would silently work around: an ignored value or an overridden option.
struct CmdlineIssue {
  std::string param;    // the parameter as written
  std::string message;  // what the kernel does with it
};

/// The IOMMU-related options of a command line, resolved with the kernel's own precedence.
struct IommuCmdline {
  std::vector<std::string> params;  // every IOMMU-related parameter, in order, as written

  // iommu=pt|nopt and iommu.passthrough= set the same variable: the last one wins.
  std::optional<bool> passthrough;
  std::string passthroughBy;
  // iommu.strict=; overridden by the legacy driver options below, whatever the order.
  std::optional<bool> strict;
  std::string strictBy;
  bool legacyStrict = false;  // intel_iommu=strict or amd_iommu=fullflush
  std::string legacyStrictBy;

  bool iommuOff = false;        // x86 iommu=off (only on x86: docs/kernel.md §1.5)
  bool iommuForce = false;      // x86 iommu=force
  std::optional<bool> intelOn;  // intel_iommu=on|off (the last wins)
  std::string intelOnBy;
  std::optional<bool> intelScalableMode;  // intel_iommu=sm_on|sm_off
  bool amdOff = false;
  bool amdForceIsolation = false;
  bool amdGiven = false;    // any amd_iommu= option
  bool intelGiven = false;  // any intel_iommu= option
  bool swiotlbNoforce = false;
  std::optional<bool> memEncrypt;  // mem_encrypt=on|off

  std::vector<CmdlineIssue> issues;
};

/// On x86 (and when the architecture is unknown) every parameter below is read as the x86 kernel
/// reads it. Elsewhere x86's `iommu=` and the x86-only drivers' `intel_iommu=`/`amd_iommu=` set
/// nothing: on arm64 the kernel does not know them, and an issue says so (docs/kernel.md §1.5).
IommuCmdline interpretIommuCmdline(const std::vector<CmdlineParam>& params, Arch arch);

/// True for parameters that may identify a machine or person and are not IOMMU options
/// (root=UUID=..., ip=..., hostnames in nfsroot=...): used to redact snapshots.
bool isIommuRelated(std::string_view key);

}  // namespace iommud::core
