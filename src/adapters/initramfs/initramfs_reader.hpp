#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "core/host.hpp"
#include "core/result.hpp"

namespace iommud::adapters::initramfs {

/// How an image is listed: by the first of `listers` that is installed (looked up in PATH), run
/// with the image as its only argument, within `timeout`, printing at most `maxOutput` bytes.
struct ListOptions {
  // Debian's lsinitramfs (initramfs-tools-core) and dracut's lsinitrd know every compression
  // and the uncompressed early microcode archive in front.
  std::vector<std::string> listers = {"lsinitramfs", "lsinitrd"};
  std::chrono::milliseconds timeout{30000};
  size_t maxOutput = size_t{64} << 20U;
};

/// The listing of an image, as its lister prints it. Errors: no lister installed (ENOENT), the
/// lister failed (its last line of stderr), ran out of time (ETIMEDOUT, its process group is
/// killed) or printed too much (EFBIG).
core::Result<std::string> listImage(const std::string& path, const ListOptions& options = {});

/// The initramfs of `release` under the root, /boot/initrd.img-<release> (Debian) or
/// /boot/initramfs-<release>.img (Fedora), with the modules it holds. Never fails: no image is
/// `Absent`, one that cannot be listed is `Unreadable` with the reason.
core::Initramfs readInitramfs(const sysfs::Root& root, const std::string& release, const ListOptions& options = {});

}  // namespace iommud::adapters::initramfs
