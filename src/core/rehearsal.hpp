#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/domain_change.hpp"
#include "core/domain_safety.hpp"
#include "core/plan.hpp"

namespace iommud::core {

/// What a rehearsal (`iommuctl apply --simulate`) says would become of one item of a plan, judged
/// by the rules apply's preflight and the kernel's table use, on the facts of the host it was made for.
struct Rehearsed {
  enum class Verdict { Taken, Refused, Advised };
  Verdict verdict = Verdict::Taken;
  ChangeKind kind = ChangeKind::Domain;
  std::string device;  // the PCI address it is planned for
  std::string object;  // "group 14", "enp3s0", "nvme.poll_queues", a modprobe.d file
  std::string key;
  std::string from;  // empty for a refusal: the plan holds what was wanted only
  std::string to;
  RuleRef rule;
  std::string tradeOff;
  bool live = false;               // a domain change taken with the drivers bound (DMA -> DMA-FQ)
  std::vector<MemberStep> unbind;  // a domain change taken after unbinding these (address, driver)
  bool assumed = false;            // an ethtool setting whose current value was not read (a snapshot holds none)
  std::optional<TypeWriteVerdict> kernel;  // a domain refusal: the write as the kernel would judge it
  std::optional<DomainRefusal> safety;     // a domain refusal of iommud's rules, not the kernel's
  std::string why;                         // a refusal in words
};

struct Rehearsal {
  std::vector<Rehearsed> items;  // the plan's changes in its order, then what would be refused
  [[nodiscard]] size_t count(Rehearsed::Verdict v) const;
};

/// Runs `plan` through the rules of `host`'s kernel without touching anything: each change in
/// apply mode taken (a domain change live or after which unbinds, judged as preflight judges it),
/// each advice left to advise, and each wish the planner skipped because the kernel, or a safety
/// rule, would refuse it, refused with the check and errno the kernel's write would meet.
Rehearsal rehearse(const Plan& plan, const HostFacts& host);

}  // namespace iommud::core
