#pragma once

#include "adapters/systemd/log.hpp"
#include "app/change/outcome.hpp"
#include "core/host.hpp"

namespace iommud::app {

/// The journal entry for what became of one change: a MESSAGE_ID per kind of event (a change
/// that weakens isolation, any other change, advice, refusal, failure, drift), its priority (a
/// weakening change is a warning), the IOMMUD_* fields, and a message naming the group's devices
/// and the rule (file:line:col) that decided it.
/// What the outcome is of: a change made by the policies, or the revert of one (revert-on-stop,
/// `Revert`), whose entry says so and names the rule that had made it.
enum class OutcomeOf { Apply, Revert };
adapters::systemd::Entry journalEntry(const Outcome& o, const core::HostFacts& host, OutcomeOf of = OutcomeOf::Apply);

/// Whether a skipped change is a refusal: not one that waits for a hotplug, nor one a later rule
/// overrides.
bool isRefusal(const Outcome& o);

}  // namespace iommud::app
