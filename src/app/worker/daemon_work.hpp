#pragma once

#include <optional>
#include <string>
#include <vector>

#include "adapters/sysfs/host_reader.hpp"
#include "adapters/sysfs/root.hpp"
#include "adapters/sysfs/writer.hpp"
#include "adapters/systemd/log.hpp"
#include "adapters/trace/tracefs.hpp"
#include "app/change/apply.hpp"
#include "app/change/domain_transaction.hpp"
#include "app/change/reconcile.hpp"
#include "app/fleet/fleet_export.hpp"
#include "app/fleet/fleet_files.hpp"
#include "app/host/status.hpp"
#include "app/worker/worker_report.hpp"
#include "config/daemon_config.hpp"
#include "core/plan.hpp"
#include "core/policy.hpp"

namespace iommud::app {

/// What the daemon's worker does with one WorkerRequest (in the worker process; with --once in
/// the daemon itself): reconcile a batch or the whole host, a D-Bus call, a view of the host for
/// the properties and the fleet exports, the recovery of a transaction a dead worker left. It
/// logs every outcome and says what became of each device in the WorkerReport; it keeps nothing
/// between requests (what it needs of the daemon's state comes in the request).
class DaemonWork {
 public:
  /// All by reference: the daemon's own, which a reload replaces in place.
  DaemonWork(const adapters::sysfs::Root& root, adapters::sysfs::SysfsWriter& writer, const StatePaths& state,
             const config::DaemonConfig& config, const core::PolicySet& policies, bool early,
             const adapters::systemd::Log& log, const std::optional<adapters::trace::DmaCounters>& dma)
      : root_(root),
        writer_(writer),
        state_(state),
        config_(config),
        policies_(policies),
        early_(early),
        log_(log),
        dma_(dma) {}

  /// The request's report; nullopt when the host could not be read (the work was cut short).
  std::optional<WorkerReport> run(const WorkerRequest& work);

  /// A batch (or, empty, the whole host) reconciled; false when the host could not be read.
  /// `unchanged`, when given: the host as last read, if nothing the batch did changed it since.
  bool reconcileBatch(const WorkerRequest& work, WorkerReport& report, std::optional<Status>* unchanged = nullptr);

  /// A transaction recovered, as the journal's kRecovered entry.
  void logRecovery(const RecoveryReport& r) const;

  /// revert-on-stop, in the daemon once its worker has ended: every recorded change reverted and
  /// logged (the reverts counted in `counters`), then the exports rewritten to say what the revert
  /// left, as they outlive the daemon. The exports' results, for the daemon to log.
  std::vector<ExportResult> revertAtStop(Counters& counters);

 private:
  bool recover(WorkerReport& report);
  /// The names the request gave that are not on the host; nullopt when the host could not be read.
  std::optional<std::vector<std::string>> reconcileSome(const ReconcileRequest& asked, const WorkerRequest& work,
                                                        WorkerReport& report, std::optional<Status>* unchanged);
  void runCall(const WorkerRequest& work, WorkerReport& report);
  void revert(const std::string& device, WorkerReport& report);
  void plan(core::Trigger trigger, const std::string& device, WorkerReport& report);
  void addExports(const Status& status, const Counters& counters, WorkerReport& report);
  bool addView(const WorkerRequest& work, const Counters& counters, WorkerReport& report,
               std::optional<Status> read = std::nullopt);

  const adapters::sysfs::Root& root_;
  adapters::sysfs::SysfsWriter& writer_;
  const StatePaths& state_;
  const config::DaemonConfig& config_;
  const core::PolicySet& policies_;
  bool early_;
  const adapters::systemd::Log& log_;
  const std::optional<adapters::trace::DmaCounters>& dma_;
  // The kernel's and the firmware's facts, read at this worker's first read of the host and kept:
  // they cannot change before a reboot (readHost), and /proc/config.gz is inflated only once.
  adapters::sysfs::BootFacts boot_;
};

}  // namespace iommud::app
