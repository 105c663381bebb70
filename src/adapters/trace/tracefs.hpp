#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "core/dma_stats.hpp"
#include "core/result.hpp"

// iommud's own tracefs instance with the histogram triggers of docs/measure.md. Only I/O here:
// what the files say is parsed by core/dma_stats.

namespace iommud::adapters::trace {

using core::Result;

/// Who owns an instance: "iommud-<pid>-<start>", start being the owner's start time in clock
/// ticks since boot (/proc/<pid>/stat field 22), so that a recycled pid is not taken for it.
struct InstanceOwner {
  int pid = 0;
  uint64_t start = 0;

  bool operator==(const InstanceOwner&) const = default;
};
std::string instanceName(const InstanceOwner& owner);
/// nullopt for a name that is not an iommud instance's.
std::optional<InstanceOwner> parseInstanceName(std::string_view name);
/// The start time in /proc/<pid>/stat's text (the comm may hold spaces and parentheses).
std::optional<uint64_t> parseStartTime(std::string_view statText);

/// The calling process, as its instances are named.
Result<InstanceOwner> thisProcess(const sysfs::Root& root);
/// Whether the owner still runs (its /proc entry exists with the same start time).
bool isAlive(const sysfs::Root& root, const InstanceOwner& owner);

/// Where tracefs is: /sys/kernel/tracing, else the debugfs path of kernels before 4.1. An Error
/// (ENOENT) says in words that it is not mounted and how to mount it.
Result<std::string> findTracefs(const sysfs::Root& root);

/// What the start-time sweep did.
struct Sweep {
  std::vector<std::string> removed;   // instance names
  std::vector<core::Error> failures;  // instances that stay, and why
};
/// Removes every iommud instance whose owner is gone (docs/measure.md "Cleanup"): rmdir, which
/// takes the triggers with it; on EBUSY (a file of it is open) the triggers first, then rmdir.
Sweep removeStaleInstances(const sysfs::Root& root, std::string_view tracefs);

/// Reads a tracefs file to its end. Root::readFile stops after a short read under /sys, and a
/// `hist` file's seq_file may return less than asked before the end.
Result<std::string> readAll(const sysfs::Root& root, std::string_view path);

/// The instance and its triggers; removed when the owner is destroyed.
class DmaCounters {
 public:
  /// Sweeps stale instances, creates this process's, shrinks its unused ring buffer and arms the
  /// triggers of every event this kernel has. EACCES/EPERM come back as such (the caller says
  /// who may measure); an event that exists but cannot be armed is an error.
  static Result<DmaCounters> open(const sysfs::Root& root);

  DmaCounters(DmaCounters&& other) noexcept;
  DmaCounters& operator=(DmaCounters&&) = delete;
  DmaCounters(const DmaCounters&) = delete;
  DmaCounters& operator=(const DmaCounters&) = delete;
  ~DmaCounters();

  /// One `hist` read per armed event, folded into a reading.
  [[nodiscard]] Result<core::DmaReading> read() const;

  [[nodiscard]] const std::string& instance() const { return instance_; }
  /// Events this kernel does not have (the dma:* ones before 6.12).
  [[nodiscard]] const std::vector<core::DmaEvent>& absent() const { return absent_; }
  /// Instances of dead owners the start removed.
  [[nodiscard]] const Sweep& sweep() const { return sweep_; }

  /// Removes the instance now; the destructor then has nothing to do.
  Result<core::Done> close();

 private:
  DmaCounters(const sysfs::Root& root, std::string instance);

  const sysfs::Root* root_;
  std::string instance_;                                       // host path; empty once removed
  std::vector<std::pair<core::DmaEvent, std::string>> armed_;  // and the event's directory
  std::vector<core::DmaEvent> absent_;
  Sweep sweep_;
};

/// Removes an instance: rmdir; on EBUSY each trigger, then rmdir again.
Result<core::Done> removeInstance(const sysfs::Root& root, const std::string& instance);

}  // namespace iommud::adapters::trace
