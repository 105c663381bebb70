#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/domain_change.hpp"
#include "core/result.hpp"

namespace iommud::adapters::state {

using core::Done;
using core::Result;

/// What a transaction journal says: the change it was for, the steps announced, and how it ended
/// (nullopt: it did not end; the process died half-way).
struct JournalRecord {
  core::DomainChange change;
  std::vector<std::string> steps;
  std::optional<std::string> end;
  /// Lines not understood, in words ("line 7: bad member line"): the rest is read all the same, so
  /// that recovery rebinds every member the header names. A last line without its newline is no
  /// damage: an append torn by a crash, taken as never written.
  std::vector<std::string> damage;
};

/// What of a journal is read: a journal is a few hundred bytes.
inline constexpr size_t kMaxJournalBytes = 1U << 20U;

/// The journal's text: a versioned header naming the group, the types and every member with the
/// driver it had, then one line per step. Pure, for tests and for recovery. A journal with no whole
/// line (begun on a full disk, its header torn) was never begun: nothing was unbound after it, and
/// it reads as ended.
std::string formatJournalHeader(const core::DomainChange& change);
Result<JournalRecord> parseJournal(std::string_view text);

/// The journal of the one running domain transaction, a file in /run/iommud: each step is written
/// and synced *before* it is taken, so that after a crash the next start knows which devices to
/// rebind. Appends only; the file is removed when the transaction has ended. A journal that did
/// not end (a device left unbound, a process killed, a file that does not parse) is never
/// overwritten: the next begin keeps it as "PATH.pending-N" for recovery.
class Journal {
 public:
  explicit Journal(std::string path) : path_(std::move(path)) {}

  /// Starts the journal of `change`, synced; an unended one is kept aside first.
  Result<Done> begin(const core::DomainChange& change);
  /// Announces a step ("unbind 0000:01:00.0"), synced.
  Result<Done> step(std::string_view what);
  /// Records the outcome and removes the journal: nothing is left to recover.
  Result<Done> end(std::string_view outcome);

  /// The journal left by an earlier process, if any.
  [[nodiscard]] Result<std::optional<JournalRecord>> read() const;
  /// Removes it once recovered.
  Result<Done> discard();
  [[nodiscard]] const std::string& path() const { return path_; }

  /// Every journal left for recovery: this one, if it exists, then the pending ones by number.
  [[nodiscard]] std::vector<std::string> leftovers() const;
  /// Of the names in a directory, those of journal `name`'s leftovers, in leftovers()' order (pure:
  /// for a reader that lists the directory itself, contained in a root).
  [[nodiscard]] static std::vector<std::string> leftoverNames(const std::vector<std::string>& entries,
                                                              std::string_view name);
  /// Renames an unreadable journal to "PATH.unreadable-TIME" (never deleted: the administrator's
  /// to read), synced; the new name.
  Result<std::string> moveAside(long now) const;

 private:
  Result<Done> append(std::string_view line);
  std::string path_;
};

}  // namespace iommud::adapters::state
