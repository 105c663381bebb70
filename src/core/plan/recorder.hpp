#pragma once

#include <string>

#include "core/plan.hpp"

namespace iommud::core::planning {

RuleRef refOf(const Rule& r);

// The plan being written, and when a rule may act: what every part of the planner shares.
struct Recorder {
  const PlanOptions& options;
  Plan plan;

  void skip(ChangeKind kind, const std::string& device, std::string object, std::string key, std::string wanted,
            const Rule& r, SkipReason reason, std::string message);

  RuleMode modeOf(const Rule& r) const { return options.adviseOnly ? RuleMode::Advise : r.mode; }

  // A rule acts at coldplug if it says `always`, or says nothing or `boot` and the change is not
  // disruptive: a boot rule's disruptive changes belong to the moments nothing holds the device
  // (boot and hotplug). At boot only boot rules are planned at all, and they act fully.
  bool allowedNow(const Rule& r, bool disruptive) const;

  static std::string hotplugOnlyMessage(const Rule& r, const std::string& what);
};

}  // namespace iommud::core::planning
