#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapters/state/lock.hpp"
#include "adapters/sysfs/root.hpp"
#include "app/change/apply.hpp"
#include "app/change/domain_transaction.hpp"
#include "app/change/netlink_ethtool.hpp"
#include "app/host/status.hpp"
#include "core/plan.hpp"
#include "core/state_findings.hpp"

namespace iommud::app {

/// What the one writer holds while it works: the lock, and what it found left half-done.
struct WriterSession {
  adapters::state::WriterLock lock;
  Recovery recovered;
  std::vector<core::DamagedStateFile> damage;  // records files not understood whole (readRecordsView)
  /// What the writer goes on without: devices left unbound, records not understood; "" when none.
  [[nodiscard]] std::string degraded() const;
};

/// How long a writer waits for the writer lock, and what it says while it waits (who holds it).
/// No bound: it fails at once when another process has the lock (iommuctl).
struct LockWait {
  std::chrono::milliseconds bound{0};
  std::function<void(const std::string& holder)> waiting;
};

/// What every writer does first: create the run directory, take the writer lock (waiting as `wait`
/// says), then finish or roll back every transaction earlier processes left half-done. What
/// recovery cannot resolve is in `recovered` (problems, leftUnbound), not an error: the writer goes
/// on, degraded, and says so.
core::Result<WriterSession> beginWriting(ApplyContext& ctx, const LockWait& wait = {});

/// The host as the planner needs it, read fresh: devices, modules the policies name, NIC settings
/// (on the live host); the initramfs only once a plan writes modprobe.d (listInitramfsFor).
struct HostView {
  Status status;
  std::unique_ptr<NetlinkEthtool> ethtool;  // nullptr under a root prefix, or without ethtool netlink
  std::string ethtoolError;                 // why it is nullptr on the live host
};
core::Result<HostView> readHostView(const adapters::sysfs::Root& root, const core::PolicySet& policies,
                                    adapters::sysfs::BootFacts* boot = nullptr);

/// What to reconcile: the whole host as at start (coldplug), or devices by name: those that just
/// appeared, or one a caller named, and in the same batch devices that were there before.
struct ReconcileRequest {
  core::Trigger trigger = core::Trigger::Coldplug;  // the whole host's, or `devices'`
  std::vector<std::string> devices;                 // any name findDevice takes; empty, with `cold`: every device
  std::vector<std::string> cold;                    // decided as at start (Trigger::Coldplug), in the same read
  bool adviseOnly = false;                          // every change is advice
};

struct Reconciled {
  std::vector<Outcome> outcomes;           // what the policies want and will not happen (Skipped), then what apply did
  std::vector<core::Satisfied> satisfied;  // settings that already hold
  core::HostFacts host;                    // as read before the first round
  std::vector<std::string> decided;        // the PCI addresses of the request's `devices` on that read
  std::vector<std::string> decidedCold;    // and of its `cold` ones
  std::vector<std::string> absent;         // names requested that are not on the host (removed meanwhile)
  /// The host as the last round read it, while nothing done since has changed it (no outcome
  /// done or failed): what a view of the host after the work can use instead of reading again.
  std::optional<Status> unchanged;
};

/// Reads the host, plans (the devices' plans merged, each change once) and applies. A domain
/// change rebinds drivers: what else the plan has for that group is planned again on the fresh
/// devices, in a second round.
core::Result<Reconciled> reconcile(const core::PolicySet& policies, const ReconcileRequest& request, ApplyContext& ctx);

/// What a revert did, and the host as it read it before.
struct Reverted {
  std::vector<Outcome> outcomes;
  core::HostFacts host;
};

/// Reverts what iommud changed on the device called `name` (any name findDevice takes), or on
/// every device when `name` is empty, on one read of the host; ENODEV when no device has that name.
/// `keptFile`: as revertChanges'.
core::Result<Reverted> revertNamed(const std::string& name, ApplyContext& ctx, const std::string& keptFile = "");

}  // namespace iommud::app
