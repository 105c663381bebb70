#include "adapters/systemd/log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
// Else sd_journal_sendv is a macro adding CODE_FILE/CODE_LINE/CODE_FUNC of this file, which say nothing.
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>

#include "support/unique_fd.hpp"

namespace iommud::adapters::systemd {

namespace {

constexpr std::array<std::string_view, 4> kOwnFields = {"MESSAGE", "PRIORITY", "MESSAGE_ID", "SYSLOG_IDENTIFIER"};

std::string_view levelWord(Priority p) {
  switch (p) {
    case Priority::Err: return "error";
    case Priority::Warning: return "warning";
    case Priority::Notice: return "notice";
    case Priority::Info: return "info";
    case Priority::Debug: return "debug";
  }
  return "info";
}

// JOURNAL_STREAM is "DEV:INODE" in decimal (systemd.exec(5)): the stream journald gave the
// service as stdout/stderr. Matching stderr's own numbers tells a redirected stderr apart.
bool stderrIsJournalStream() {
  const char* value = std::getenv("JOURNAL_STREAM");  // NOLINT(concurrency-mt-unsafe): read once at start
  if (value == nullptr) return false;
  std::string_view text(value);
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  std::uintmax_t dev = 0, ino = 0;
  auto [devEnd, devErr] = std::from_chars(text.data(), text.data() + colon, dev);
  auto [inoEnd, inoErr] = std::from_chars(text.data() + colon + 1, text.data() + text.size(), ino);
  if (devErr != std::errc{} || devEnd != text.data() + colon || inoErr != std::errc{} ||
      inoEnd != text.data() + text.size())
    return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<std::uintmax_t>(st.st_dev) == dev && static_cast<std::uintmax_t>(st.st_ino) == ino;
}

constexpr const char* kKmsg = "/dev/kmsg";
// devkmsg_write() refuses a record longer than LOG_LINE_MAX (1024 - 32) with EINVAL.
constexpr size_t kKmsgMax = 960;

// One write(2) per entry, so entries from several threads do not interleave.
void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere left to report it
    done += static_cast<size_t>(n);
  }
}

void writeStderr(const std::string& text) {
  writeAll(STDERR_FILENO, text);
}

// Opened for each entry: the kernel rate-limits each open file of /dev/kmsg to 10 records in 5 s
// (printk.devkmsg=ratelimit, the default), and a boot's worth of entries is more than that.
bool writeKmsg(const std::string& record) {
  const support::UniqueFd fd(::open(kKmsg, O_WRONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return false;
  ssize_t n = 0;
  do {
    n = ::write(fd.get(), record.data(), record.size());
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(record.size());
}

// The fallback when the journal refuses an entry while stderr is journald's stream: "<N>" before
// each line is the priority prefix journald's stream reader understands (sd-daemon(3)).
std::string prefixedLines(const Entry& e) {
  std::string prefix = "<" + std::to_string(static_cast<int>(e.priority)) + ">";
  std::string out = prefix;
  for (char c : e.message) {
    out += c;
    if (c == '\n') out += prefix;
  }
  return out + "\n";
}

}  // namespace

bool validFieldName(std::string_view name) {
  // journald's journal_field_valid(): 1 to 64 of [A-Z0-9_], not starting with '_' or a digit.
  if (name.empty() || name.size() > 64 || name[0] == '_' || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
}

bool validMessageId(std::string_view id) {
  return id.size() == 32 &&
         std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::string> journalFields(const Entry& e) {
  std::vector<std::string> out;
  out.reserve(4 + e.fields.size());
  out.push_back("MESSAGE=" + e.message);
  out.push_back("PRIORITY=" + std::to_string(static_cast<int>(e.priority)));
  if (validMessageId(e.messageId)) out.push_back("MESSAGE_ID=" + e.messageId);
  out.emplace_back("SYSLOG_IDENTIFIER=iommud");
  for (const auto& f : e.fields) {
    if (!validFieldName(f.name) || std::find(kOwnFields.begin(), kOwnFields.end(), f.name) != kOwnFields.end())
      continue;
    out.push_back(f.name + "=" + f.value);
  }
  return out;
}

std::string stderrLine(const Entry& e) {
  return "iommud: " + std::string(levelWord(e.priority)) + ": " + e.message;
}

std::string kmsgLine(const Entry& e) {
  std::string out = "<" + std::to_string(static_cast<int>(e.priority)) + ">iommud: ";
  std::string_view msg = e.message;
  if (size_t room = kKmsgMax - out.size(); msg.size() > room) {
    // Not in the middle of a UTF-8 sequence: the cut goes before the first byte left out's lead byte.
    while (room > 0 && (static_cast<unsigned char>(msg[room]) & 0xC0) == 0x80) --room;
    msg = msg.substr(0, room);
  }
  for (char c : msg) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;
  return out + "\n";
}

Log Log::fromEnvironment() {
  return Log(stderrIsJournalStream() ? Target::Journal : Target::Stderr);
}

Log Log::forEarlyBoot() {
  if (stderrIsJournalStream()) return Log(Target::Journal);
  return Log(::access(kKmsg, W_OK) == 0 ? Target::Kmsg : Target::Stderr);
}

Log::Log(Target target, Priority maxPriority)
    : target_(target), maxPriority_(maxPriority), stderrIsJournal_(stderrIsJournalStream()) {}

void Log::write(const Entry& e) const {
  if (static_cast<int>(e.priority) > static_cast<int>(maxPriority_)) return;
  if (target_ == Target::Journal) {
    auto fields = journalFields(e);
    std::vector<iovec> iov;
    iov.reserve(fields.size());
    for (auto& f : fields) iov.push_back(iovec{f.data(), f.size()});
    // Datagrams that are too large go as a sealed memfd; failure means journald is not there
    // (stopped, or not this system's logger) or out of buffer space.
    if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) return;
    writeStderr(stderrIsJournal_ ? prefixedLines(e) : stderrLine(e) + "\n");
    return;
  }
  if (target_ == Target::Kmsg && writeKmsg(kmsgLine(e))) return;
  writeStderr(stderrLine(e) + "\n");
}

void Log::info(std::string msg) const {
  write({Priority::Info, "", std::move(msg), {}});
}
void Log::notice(std::string msg) const {
  write({Priority::Notice, "", std::move(msg), {}});
}
void Log::warning(std::string msg) const {
  write({Priority::Warning, "", std::move(msg), {}});
}
void Log::error(std::string msg) const {
  write({Priority::Err, "", std::move(msg), {}});
}
void Log::debug(std::string msg) const {
  write({Priority::Debug, "", std::move(msg), {}});
}

}  // namespace iommud::adapters::systemd
