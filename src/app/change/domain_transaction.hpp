#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/state/journal.hpp"
#include "adapters/sysfs/root.hpp"
#include "adapters/sysfs/writer.hpp"
#include "core/domain_change.hpp"
#include "core/unbound_findings.hpp"

namespace iommud::app {

/// Test hooks: called after each step ("unbind 0000:01:00.0", "write identity", "bind ..."), so
/// that a test can pause the transaction there or kill the process. (A bind is read back right
/// after its write: the kernel binds before the write returns, docs/kernel.md §2.2, and so does
/// the umockdev testbed, through tests/daemon/sync_writes.cpp.)
struct TransactionHooks {
  std::function<void(std::string_view step)> afterStep;
};

/// The real-kernel tests' way to stop iommuctl apply at a step (tests/vm, IOMMUD_TEST_STOP_AFTER in
/// iommuctl(1)): `stop` runs once, after the Nth step whose name starts with PREFIX, `spec` being
/// "PREFIX" (N = 1) or "PREFIX#N". Steps are the transaction's and the records' ("save PATH").
TransactionHooks stopAfter(std::string_view spec, std::function<void()> stop);

/// How a domain transaction went.
struct TransactionReport {
  core::DomainChange change;
  bool succeeded = false;
  bool rolledBack = false;
  bool gone = false;                     // every device of the group was removed mid-way: neither done nor failed
  std::string failedStep;                // "unbind 0000:01:00.0 from nvme", "write type identity", ...
  std::string error;                     // the kernel's answer, explained for this kernel version
  std::vector<std::string> vanished;     // devices that went away meanwhile: hotplug, not a failure
  std::vector<std::string> leftUnbound;  // devices iommud could not rebind: the journal stays for the next start
  std::optional<core::DomainType> finalType;
  std::chrono::nanoseconds kernelTime{};  // spent in the kernel's unbind, bind and type writes
  std::chrono::nanoseconds totalTime{};

  /// One line for people: "group 14 (0000:01:00.0, 0000:01:00.1): DMA -> identity" and how it ended.
  [[nodiscard]] std::string summary() const;
};

/// Runs one group default-domain change as a transaction: unbind the drivers that hold DMA
/// ownership, write the type, rebind each device to the driver it had, read back the type and
/// every binding. On failure at any step it restores the old type and rebinds. Each step is
/// journaled before it is taken. A self-contained unit of work: it touches only its arguments,
/// so it can run in a child process while the daemon's loop goes on.
TransactionReport runDomainChange(const core::DomainChange& change, const adapters::sysfs::Root& root,
                                  adapters::sysfs::SysfsWriter& writer, adapters::state::Journal& journal,
                                  const std::optional<core::KernelVersion>& kernel, const TransactionHooks& hooks = {});

/// What recovery found and did after a transaction was cut short.
struct RecoveryReport {
  adapters::state::JournalRecord record;
  std::vector<std::string> rebound, vanished, failed;
  std::vector<std::string> errors;  // per device failed: "could not rebind 0000:00:02.0 to nvme: ..."
  std::optional<core::DomainType> type;
  std::string outcome;  // "finished" (the new type holds), "rolled back" (the old one does), or what it is
};

/// Finishes or rolls back the transaction a journal left behind: rebinds every device the journal
/// meant to unbind that exists and has no driver, and reads the type. Nothing to do: nullopt.
/// The journal is removed once every device is bound again.
core::Result<std::optional<RecoveryReport>> recoverDomainChange(const adapters::sysfs::Root& root,
                                                                adapters::sysfs::SysfsWriter& writer,
                                                                adapters::state::Journal& journal);

/// What recovery left unresolved, across every journal an earlier process left (the current one
/// and the pending ones a later change kept aside): the start goes on, degraded.
struct Recovery {
  std::vector<RecoveryReport> recovered;       // one per journal that needed work
  std::vector<std::string> problems;           // one line each: a device not rebound, a journal moved aside
  std::vector<std::string> leftUnbound;        // devices still without their driver: their journals stay
  [[nodiscard]] std::string degraded() const;  // "1 device left unbound: 0000:00:02.0"; "" when none
};

/// Recovers every journal beside `journal`'s path: each fully recovered is removed, one with a
/// device still unbound is kept for the next start, and one that cannot be read is moved aside
/// (Journal::moveAside at `now`, seconds) and named in `problems`. Never fails: nothing here may
/// stop a start.
Recovery recoverDomainChanges(const adapters::sysfs::Root& root, adapters::sysfs::SysfsWriter& writer,
                              const adapters::state::Journal& journal, long now);

/// The devices the journals kept in `runDir` (host path) name as unbound and that still have no
/// driver: what `status` shows as findings. Reads only; an unreadable journal names none.
std::vector<core::UnboundDevice> unboundDevices(const adapters::sysfs::Root& root, const std::string& runDir);

/// Paths of the attributes a domain transaction writes.
std::string groupTypePath(int group);
std::string driverPath(std::string_view driver, std::string_view action);  // action: "bind", "unbind"

}  // namespace iommud::app
