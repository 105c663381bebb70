#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace iommud::adapters::systemd {

/// How serious an entry is, as syslog numbers (journald's PRIORITY= field).
enum class Priority { Err = 3, Warning = 4, Notice = 5, Info = 6, Debug = 7 };

/// One structured journal field. The name is [A-Z0-9_], 64 characters at most, not starting with
/// '_' (journald keeps those for itself) or a digit, e.g. IOMMUD_DEVICE.
struct Field {
  std::string name;
  std::string value;
};

/// One log entry: a message for people, and a MESSAGE_ID and fields for tools and the catalog.
struct Entry {
  Priority priority = Priority::Info;
  std::string messageId;  // 32 lowercase hex digits (app/change/message_ids.hpp), or empty
  std::string message;
  std::vector<Field> fields;
};

/// Where iommud's entries go: the journal's native protocol (sd_journal_sendv, with fields), one
/// line per entry on stderr, or one line per entry in the kernel's log (/dev/kmsg, at boot before
/// journald exists: journald reads the kernel's log when it starts, so the lines reach it). Writing is thread-safe and
/// never fails: an entry the journal refuses is written to stderr instead. (libsystemd drops an entry without a word
/// when journald's socket does not exist at all; fromEnvironment() picks the journal only when journald is there.)
class Log {
 public:
  enum class Target { Journal, Stderr, Kmsg };

  /// Journal when stderr is connected to journald (the JOURNAL_STREAM environment variable names
  /// stderr's device:inode, as systemd documents), else stderr.
  static Log fromEnvironment();
  /// As fromEnvironment(), but the kernel's log instead of stderr when /dev/kmsg can be written
  /// (`iommud --early` in an initramfs: no journald yet, and the console may be nobody's).
  static Log forEarlyBoot();

  explicit Log(Target target, Priority maxPriority = Priority::Info);

  void setMaxPriority(Priority p) { maxPriority_ = p; }
  [[nodiscard]] Priority maxPriority() const { return maxPriority_; }
  [[nodiscard]] Target target() const { return target_; }

  /// Dropped if e.priority > maxPriority().
  void write(const Entry& e) const;

  void info(std::string msg) const;
  void notice(std::string msg) const;
  void warning(std::string msg) const;
  void error(std::string msg) const;
  void debug(std::string msg) const;

 private:
  Target target_;
  Priority maxPriority_;
  bool stderrIsJournal_;  // for the fallback line when the journal refuses an entry
};

/// The journal fields of an entry, as "NAME=value" strings in sd_journal_sendv order: MESSAGE,
/// PRIORITY, MESSAGE_ID (if valid), SYSLOG_IDENTIFIER=iommud, then the entry's fields. Fields
/// with an invalid name, or one of the four names set here, are dropped. Values may hold newlines
/// and any byte: sd_journal_sendv sends such a field length-prefixed.
std::vector<std::string> journalFields(const Entry& e);

/// The line (without '\n') for stderr: "iommud: warning: message". Plain words rather than
/// systemd's "<4>message" prefix: when stderr is journald's stream, entries go through the native
/// protocol instead, so this line is read by a person at a terminal, a test, or a supervisor that
/// is not journald, none of which understands the prefix. Fields and MESSAGE_ID are journal-only:
/// the message must say what happened on its own.
std::string stderrLine(const Entry& e);

/// The record for /dev/kmsg (with its '\n'): "<4>iommud: message", the syslog priority with the
/// kernel's default facility (user), newlines and other control characters as spaces so that an
/// entry is one record, cut to fit the kernel's limit of a record written there.
std::string kmsgLine(const Entry& e);

/// Whether `name` may be a field of an Entry (see Field).
bool validFieldName(std::string_view name);

/// Whether `id` is a MESSAGE_ID journald and the catalog accept: 32 lowercase hex digits.
bool validMessageId(std::string_view id);

}  // namespace iommud::adapters::systemd
