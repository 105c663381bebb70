#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/sysfs/root.hpp"
#include "app/change/state_paths.hpp"
#include "app/host/change_record.hpp"
#include "app/host/verify.hpp"
#include "core/result.hpp"
#include "core/state_findings.hpp"

namespace iommud::app {

/// Two readings of one setting are the same value: a parameter as the kernel prints it (Y/1), a
/// file byte for byte, a type or a NIC value without its newline.
bool sameValue(core::ChangeKind kind, std::string_view a, std::string_view b);

/// The records of what iommud changed as a reader sees them (status, verify, the daemon's view):
/// runtime and persistent, oldest first, and every records file not understood whole.
struct RecordsView {
  std::vector<ChangeRecord> records;
  std::vector<core::DamagedStateFile> damage;
  std::optional<core::Error> unreadable;  // a records file there that this user cannot read (0600)
};
RecordsView readRecordsView(const adapters::sysfs::Root& root, const StatePaths& paths);

/// The records of what iommud changed, runtime and persistent, oldest first (readRecordsView's).
std::vector<ChangeRecord> readRecords(const adapters::sysfs::Root& root, const StatePaths& paths);

/// The records of what iommud changed as the one writer keeps them (the writer lock held): /run's
/// (runtime changes, gone at reboot like the values), the state directory's (files that outlive a
/// reboot), and the state directory's copy of /run's, which says after a reboot what the reboot
/// undid. Write-ahead: `intend` saves a record pending before its change touches the host, and
/// `settleLast` settles it by what the host shows once the change is over.
///
/// A records file is never written over unless it was understood whole: one that was not (an
/// entry of another type or kind, a torn end, not a regular file, too large) is moved aside as
/// "NAME.damaged-TIME", its intact records carried over into a new NAME; one that cannot be moved
/// aside is never written. While any such file stands, damaged() says so (the caller makes no
/// change that weakens protection).
class RecordStore {
 public:
  enum class List { Runtime, Persistent };
  struct Hooks {
    std::function<Observed(const ChangeRecord&)> observe;                     // what the host shows now
    std::function<void(const std::string& path, const core::Error&)> failed;  // a file that could not be saved
    std::function<void(const std::string& step)> step;                        // a file changed on disk
  };

  /// Reads each file once. `now`: UTC, ISO 8601, for the names of files moved aside.
  RecordStore(const adapters::sysfs::Root& root, StatePaths paths, Hooks hooks, const std::string& now);

  [[nodiscard]] std::vector<ChangeRecord>& list(List which) { return which == List::Runtime ? runtime_ : persistent_; }
  /// Records of the state directory's copy that /run lost (a reboot cleared it), oldest first.
  [[nodiscard]] std::vector<ChangeRecord>& lost() { return lost_; }
  /// Every records file not understood whole, or kept aside because it was not.
  [[nodiscard]] const std::vector<core::DamagedStateFile>& damage() const { return damage_; }
  [[nodiscard]] bool damaged() const { return !damage_.empty(); }
  /// The files this store moved aside as it read them.
  [[nodiscard]] const std::vector<core::DamagedStateFile>& movedNow() const { return movedNow_; }

  /// Write-ahead: `r` on disk, pending, with the value the setting has `before` the change. False
  /// when it could not be saved: then the change must not be made (hooks.failed said why).
  [[nodiscard]] bool intend(List which, ChangeRecord r, std::string before);
  /// Settles `which`'s last record (intend's) by what the host shows, once its change is over.
  void settleLast(List which);
  /// The pending records a stopped process left, settled before anything else is done.
  void settlePending();

  /// When the state directory's copy of /run's records is written (see save).
  enum class Copy {
    IfItWouldLie,  // only if it holds a record /run no longer has, which it would call lost
    Now,           // whenever its text changes: a session's last save
  };
  /// Each file whose text changed; false when one could not be saved.
  bool save(Copy copyWhen = Copy::IfItWouldLie);

  /// Adds the intact records of a file kept aside (iommuctl revert --from) that the store lacks,
  /// so that they are reverted as any other; the file's damage is no longer reported once it is
  /// renamed (markReverted).
  void adopt(const std::vector<ChangeRecord>& records);

 private:
  void sweepTemporaries() const;
  void load(size_t i, const std::string& now);
  void settleAt(std::vector<ChangeRecord>& list, size_t i) const;
  [[nodiscard]] std::array<std::string, 3> recordPaths() const;
  [[nodiscard]] bool inRuntime(const ChangeRecord& r) const;
  [[nodiscard]] bool copyWouldLie() const;
  static void remember(std::vector<ChangeRecord>& list, ChangeRecord r);

  const adapters::sysfs::Root& root_;
  StatePaths paths_;
  Hooks hooks_;
  std::vector<ChangeRecord> runtime_, persistent_;
  std::vector<ChangeRecord> lost_;                    // in the state directory's copy, no longer in /run
  std::vector<ChangeRecord> copyOnDisk_;              // what the state directory's copy holds
  std::array<std::optional<std::string>, 3> onDisk_;  // recordPaths()' text as read; none: no file
  std::array<bool, 3> frozen_{};                      // damaged and not moved aside: never written
  std::array<bool, 3> damagedNow_{};                  // not understood whole at this read
  std::vector<core::DamagedStateFile> damage_;
  std::vector<core::DamagedStateFile> movedNow_;
};

/// A records file kept aside, read for `iommuctl revert --from`: its intact records, and what of
/// it was not understood.
core::Result<std::pair<std::vector<ChangeRecord>, std::vector<std::string>>> readKeptRecords(const std::string& path);

/// Renames a file kept aside whose records were given back to "FILE.reverted" (kept, no longer
/// reported); the new name.
core::Result<std::string> markReverted(const std::string& path);

}  // namespace iommud::app
