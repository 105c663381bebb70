#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

#include "core/host.hpp"

namespace iommud::core {

/// What a listing of an initramfs image says about the modules in it.
struct InitramfsListing {
  size_t entries = 0;             // non-empty lines: 0 means the lister found no archive at all
  std::set<std::string> modules;  // for the release asked for, as the kernel names them
};

/// Reads the kernel modules of `release` out of the listing of an image: `lsinitramfs` prints one
/// path per line (an early microcode archive first, then the main one), dracut's `lsinitrd` long
/// lines like `ls -l` with the path last. A module is a file below `lib/modules/<release>/` or
/// `usr/lib/modules/<release>/` named `*.ko`, `*.ko.xz`, `*.ko.zst` or `*.ko.gz`.
InitramfsListing parseInitramfsListing(std::string_view listing, std::string_view release);

/// A module's name as the kernel and /sys/module spell it: modprobe treats '-' and '_' alike and
/// the kernel stores '_' ("mlx5-core" -> "mlx5_core").
std::string canonicalModuleName(std::string_view name);

/// The command that rebuilds the image for a release: "update-initramfs -u -k R" (Debian) or
/// "dracut -f --kver R" (Fedora).
std::string initramfsRebuildCommand(Initramfs::Generator generator, std::string_view release);

}  // namespace iommud::core
