#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>

#include "core/result.hpp"

// A child process that does some work and exits with its code.

namespace iommud::adapters::process {

/// Runs `work` in a forked child that exits with its code (70, EX_SOFTWARE, after an exception,
/// said on stderr). Buffered output is flushed first, so that neither process writes it twice.
/// The child's pid, or fork's error.
core::Result<pid_t> forkRunning(const std::function<int()>& work);

/// The child's exit code (128 + the signal's number when a signal killed it; 1 when it cannot be
/// waited for), or nullopt when it is still running at `deadline`.
std::optional<int> waitUntil(pid_t child, std::chrono::steady_clock::time_point deadline);

}  // namespace iommud::adapters::process
