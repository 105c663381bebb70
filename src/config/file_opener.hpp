#pragma once

// How iommud_config reaches the files it reads: by the path as given (the host's own files), or,
// for a captured host under --root, inside that root, so that a link in a snapshot never opens
// a file outside it (adapters::sysfs::PrefixOpener, which the app hands in).

#include <functional>
#include <string>

#include "core/result.hpp"
#include "support/unique_fd.hpp"

namespace iommud::config {

/// `path` opened with `flags` (O_CLOEXEC added); an error names `path`.
using FileOpener = std::function<core::Result<support::UniqueFd>(const std::string& path, int flags)>;

/// The host's: open(2) on the path as given.
core::Result<support::UniqueFd> openOnHost(const std::string& path, int flags);

}  // namespace iommud::config
