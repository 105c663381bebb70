#pragma once

#include <optional>
#include <string>

#include "core/plan.hpp"

namespace iommud::app {

/// One change iommud made and the value it found, so that revert can restore it and status can
/// say what iommud changed, when and why.
struct ChangeRecord {
  core::ChangeKind kind = core::ChangeKind::Domain;
  std::string device;
  std::optional<int> group;
  std::string object;
  std::string key;
  std::string original;  // for a file: its whole text, or "" with `existed` false
  std::string written;
  bool existed = true;  // the file was there before iommud wrote it
  std::string rule;
  std::string ruleWhere;
  std::string time;  // UTC, ISO 8601
  bool irreversible = false;
  int ifindex = 0;  // ethtool changes: the interface it was made on
};

}  // namespace iommud::app
