#pragma once

#include <cstddef>
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
  // by what the host shows once the change is over (app/change/record_store.cpp). A pending record
  // that outlives its process says the change may or may not have been made; `before` is the value
  // the setting had just before it (for a file, its text; "" when there was none).
  bool pending = false;
  std::string before;
};

/// The same record: the same setting, written with the same value at the same time.
bool sameRecord(const ChangeRecord& a, const ChangeRecord& b);

/// The largest records file read: far more than any host's records (a record is ~400 bytes).
inline constexpr size_t kMaxRecordsBytes = 16U << 20U;

/// A records file as read: every entry understood, in order, and what was not understood.
struct RecordsFile {
  std::vector<ChangeRecord> records;
  /// Each thing not understood, in words ("entry 3: \"ifindex\" is a string, not a number", "it
  /// ends inside entry 4: cut short"): empty when the file was understood whole. An entry not
  /// understood (another JSON type, a kind or a key this version does not know, torn) is left out
  /// of `records`; the entries around it are read as usual.
  std::vector<std::string> damage;
  [[nodiscard]] bool whole() const { return damage.empty(); }
};

/// The records in the text of a records file, each entry read on its own with every field's type
/// checked (see RecordsFile).
RecordsFile parseRecordsFile(std::string_view text);

/// The records file at host path `path`: nullopt when there is none; an error when it is not a
/// regular file (a directory, a FIFO, a link: never followed, never blocked on), holds more than
/// kMaxRecordsBytes or cannot be read.
core::Result<std::optional<RecordsFile>> readRecordsFile(const std::string& path);

/// The text of a records file (JSON, as saveRecords writes it); an error (EILSEQ) when a record
/// holds text that is not UTF-8 (a file's bytes in another encoding), which JSON cannot carry:
/// such a record is not written, rather than written with its bytes changed.
core::Result<std::string> recordsText(const std::vector<ChangeRecord>& records);

/// Writes the records of one file atomically (writeFileAtomic, mode 0600), creating its directory
/// (0700) first; `durability` as writeFileAtomic's.
core::Result<core::Done> saveRecords(const sysfs::Root& root, const std::string& path,
                                     const std::vector<ChangeRecord>& records,
                                     Durability durability = Durability::Synced);

}  // namespace iommud::adapters::state
