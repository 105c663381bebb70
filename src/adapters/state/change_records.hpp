#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/state/atomic_file.hpp"
#include "adapters/sysfs/root.hpp"
#include "core/plan.hpp"
#include "core/result.hpp"

namespace iommud::adapters::state {

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
  // Write-ahead: a record is on disk, pending, before its change touches the host, and is settled
  // by what the host shows once the change is over (app/change/apply.cpp). A pending record that
  // outlives its process says the change may or may not have been made; `before` is the value the
  // setting had just before it (for a file, its text; "" when there was none).
  bool pending = false;
  std::string before;
};

/// The records of one file (`/run/iommud/changes.json`, `/var/lib/iommud/changes.json`, ...)
/// under `root`, oldest first: a missing file holds none, and so does a damaged one (it loses its
/// records, not the run); an entry that is not a record is left out.
std::vector<ChangeRecord> loadRecords(const sysfs::Root& root, const std::string& path);

/// The records in the text of a records file: none if it is damaged (see loadRecords).
std::vector<ChangeRecord> parseRecords(std::string_view text);

/// The text of a records file (JSON, as saveRecords writes it).
std::string recordsText(const std::vector<ChangeRecord>& records);

/// Writes the records of one file atomically (writeFileAtomic, mode 0600), creating its directory
/// (0700) first; `durability` as writeFileAtomic's.
core::Result<core::Done> saveRecords(const sysfs::Root& root, const std::string& path,
                                     const std::vector<ChangeRecord>& records,
                                     Durability durability = Durability::Synced);

}  // namespace iommud::adapters::state
