#pragma once

#include <chrono>
#include <functional>

#include "adapters/systemd/log.hpp"

namespace iommud::app {

/// Exit code of runWithin() when the work outlived its time: EX_TEMPFAIL.
inline constexpr int kExitStillRunning = 75;

/// Runs `work` in a child process and waits at most `limit` for its exit code. Past the limit it
/// logs that and returns kExitStillRunning, leaving the child to finish: killing it half-way
/// through a domain transaction would leave a disk unbound, which is worse for a boot than a
/// disk whose type is set a little later. Used by `iommud --early`, which must not hold up a boot.
int runWithin(std::chrono::milliseconds limit, const std::function<int()>& work, const adapters::systemd::Log& log);

}  // namespace iommud::app
