#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/names.hpp"
#include "core/plan.hpp"
#include "core/policy.hpp"

namespace iommud::app {

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
inline std::string_view toString(Outcome::Result r) {
  return core::nameOf(kOutcomeResultNames, r);
}

}  // namespace iommud::app
