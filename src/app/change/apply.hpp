#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "adapters/sysfs/host_reader.hpp"
#include "adapters/sysfs/root.hpp"
#include "adapters/sysfs/writer.hpp"
#include "app/change/domain_transaction.hpp"
#include "app/change/state_paths.hpp"
#include "app/host/change_record.hpp"
#include "core/names.hpp"
#include "core/plan.hpp"

namespace iommud::app {

/// The ethtool operations apply and revert need; the real one speaks netlink, tests fake it.
class EthtoolPort {
 public:
  EthtoolPort() = default;
  EthtoolPort(const EthtoolPort&) = delete;
  EthtoolPort& operator=(const EthtoolPort&) = delete;
  virtual ~EthtoolPort() = default;
  virtual core::Result<uint32_t> get(int ifindex, core::ChangeKind kind, const std::string& key) = 0;
  virtual core::Result<core::Done> set(int ifindex, core::ChangeKind kind, const std::string& key, uint32_t value) = 0;
};

/// What became of one change of a plan, or of one record at revert. Lost: a runtime change whose
/// record /run/iommud lost (a reboot cleared it, and undid the change): nothing to restore.
struct Outcome {
  enum class Result { Done, Advised, Refused, Failed, Drift, Kept, Skipped, Lost };
  Result result = Result::Done;
  core::ChangeKind kind = core::ChangeKind::Domain;
  std::string device;
  std::string object;
  std::string key;
  std::string message;  // "enp5s0 rx 2048 -> 8184", or why not
  // For the journal; empty where they do not apply.
  std::optional<int> group;
  std::string rule;       // the rule's name
  std::string ruleWhere;  // its file:line:col
  std::string from;
  std::string to;
  core::Risk risk = core::Risk::None;    // of the change, as the plan rated it
  std::string tradeOff;                  // the protection it gives up or gains, in words
  std::optional<core::SkipReason> skip;  // Skipped: why
  bool nextRound = false;                // Kept: its group was just rebound; the next round makes it
  std::vector<std::string> members;      // Domain: the group's devices (PCI addresses) before the change
};
inline constexpr core::Names<Outcome::Result, 8> kOutcomeResultNames{{{Outcome::Result::Done, "done"},
                                                                      {Outcome::Result::Advised, "advised"},
                                                                      {Outcome::Result::Refused, "refused"},
                                                                      {Outcome::Result::Failed, "failed"},
                                                                      {Outcome::Result::Drift, "drift"},
                                                                      {Outcome::Result::Kept, "kept"},
                                                                      {Outcome::Result::Skipped, "skipped"},
                                                                      {Outcome::Result::Lost, "lost"}}};
static_assert(core::checkNames(kOutcomeResultNames, Outcome::Result::Lost));
std::string_view toString(Outcome::Result r);

/// The time now, UTC, ISO 8601: what ApplyContext::now records.
std::string utcNow();

/// What apply and revert work with: the host's root, the writer in front of the kernel, ethtool
/// (nullptr: NIC settings are planned, not made, as under --root), the state paths, the clock.
struct ApplyContext {
  const adapters::sysfs::Root& root;
  adapters::sysfs::SysfsWriter& writer;
  EthtoolPort* ethtool = nullptr;
  StatePaths paths;
  std::function<std::string()> now;  // UTC time as ISO 8601
  TransactionHooks hooks;
  adapters::sysfs::BootFacts* boot = nullptr;  // a standing reader's (see readHost)
};

/// Applies the plan's changes in apply mode (advice is reported, not made), recording the value
/// each one replaced before making it. The caller holds the writer lock.
std::vector<Outcome> applyPlan(const core::Plan& plan, const core::HostFacts& host, ApplyContext& ctx);

/// Restores what iommud changed (all, or what concerns `device`), newest first, but only where the
/// value is still the one iommud wrote; elsewhere it reports drift and leaves the value alone.
/// With `keptFile` (iommuctl revert --from), a records file kept aside because it was not
/// understood whole: its intact records are reverted too, and the file is renamed *.reverted once
/// none of them is left.
std::vector<Outcome> revertChanges(const std::optional<std::string>& device, const core::HostFacts& host,
                                   ApplyContext& ctx, const std::string& keptFile = "");

/// "options nvme poll_queues=0 ..." with a header saying iommud wrote it and from which rules.
std::string modprobeFileText(const std::string& module, const std::map<std::string, std::string>& options,
                             const std::vector<std::string>& rules);

}  // namespace iommud::app
