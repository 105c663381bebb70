#include "adapters/state/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>

#include "adapters/state/atomic_file.hpp"
#include "adapters/sysfs/contained_read.hpp"
#include "core/text.hpp"
#include "support/unique_fd.hpp"
#include "support/whole_file.hpp"

namespace iommud::adapters::state {

namespace {

constexpr std::string_view kMagic = "iommud-transaction 1";

// Writes `data` to `path` (truncating or appending) and syncs it before returning.
Result<Done> writeSynced(const std::string& path, std::string_view data, bool append) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (append ? O_APPEND : O_TRUNC);
  if (int e = faultAt(append ? "open" : "truncate", path)) return core::errnoError(e, path);
  const support::UniqueFd fd(::open(path.c_str(), flags, 0600));
  if (!fd) return core::errnoError(errno, path);
  if (int e = faultAt("write", path)) return core::errnoError(e, path);
  if (auto written = writeFully(fd.get(), data, path); !written) return written;
  if (int e = faultAt("fsync", path)) return core::errnoError(e, path);
  if (::fsync(fd.get()) != 0) return core::errnoError(errno, path);
  return Done{};
}

constexpr std::string_view kPending = ".pending-";

// N of "NAME.pending-N", 0 when `file` is no pending journal of `name`.
long pendingNumber(std::string_view file, std::string_view name) {
  if (!file.starts_with(name) || !file.substr(name.size()).starts_with(kPending)) return 0;
  auto digits = file.substr(name.size() + kPending.size());
  long n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  return ec == std::errc() && end == digits.data() + digits.size() ? n : 0;
}

std::pair<std::string_view, std::string_view> firstWord(std::string_view line) {
  auto space = line.find(' ');
  if (space == std::string_view::npos) return {line, {}};
  return {line.substr(0, space), line.substr(space + 1)};
}

core::Error malformed(int line, const std::string& why) {
  return core::Error{EINVAL, "", "transaction journal line " + std::to_string(line) + ": " + why};
}

}  // namespace

std::string formatJournalHeader(const core::DomainChange& change) {
  std::string out(kMagic);
  out += "\ngroup " + std::to_string(change.group) + "\nfrom " + std::string(core::toString(change.from)) + "\nto " +
         std::string(core::toString(change.to)) + "\nlive " + (change.live ? "1" : "0") + "\n";
  for (const auto& m : change.members) {
    out += "member " + m.address + (m.unbind ? " unbind " : " keep ") + m.driver.value_or("-") + "\n";
  }
  return out;
}

namespace {

// One line of a journal after its header, into `r`; what is wrong with it, if anything.
std::optional<std::string> parseJournalLine(std::string_view line, JournalRecord& r) {
  auto [word, rest] = firstWord(line);
  if (word == "group") {
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), r.change.group);
    if (ec != std::errc() || end != rest.data() + rest.size()) return "bad group number";
  } else if (word == "from" || word == "to") {
    auto type = core::parseDomainType(rest);
    if (!type) return "unknown domain type";
    (word == "from" ? r.change.from : r.change.to) = *type;
  } else if (word == "live") {
    r.change.live = rest == "1";
  } else if (word == "member") {
    auto [address, tail] = firstWord(rest);
    auto [how, driver] = firstWord(tail);
    if (address.empty() || (how != "unbind" && how != "keep") || driver.empty()) return "bad member line";
    core::MemberStep m{std::string(address), std::nullopt, how == "unbind"};
    if (driver != "-") m.driver = std::string(driver);
    r.change.members.push_back(std::move(m));
  } else if (word == "step") {
    r.steps.emplace_back(rest);
  } else if (word == "end") {
    r.end = std::string(rest);
  } else if (!line.empty()) {
    return "unknown line";
  }
  return std::nullopt;
}

}  // namespace

Result<JournalRecord> parseJournal(std::string_view text) {
  JournalRecord r;
  // A last line without its newline: an append a crash tore (each is one write, synced before its
  // step is taken), taken as never written.
  text = text.substr(0, text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1);
  if (text.empty()) {
    r.end = "never begun: no whole line was written";
    return r;
  }
  int n = 0;
  for (auto line : core::split(text.substr(0, text.size() - 1), '\n')) {
    ++n;
    if (n == 1 && line != kMagic) {
      r.damage.emplace_back("line 1: not the header of an iommud transaction journal");
      continue;
    }
    if (n == 1) continue;
    if (auto wrong = parseJournalLine(line, r)) r.damage.push_back("line " + std::to_string(n) + ": " + *wrong);
  }
  // Not one line of a journal: not iommud's, or nothing of it left.
  if (r.change.members.empty() && r.steps.empty() && !r.end && !r.damage.empty())
    return malformed(1, "not an iommud transaction journal");
  return r;
}

Result<Done> Journal::begin(const core::DomainChange& change) {
  auto left = read();
  if (!left || (*left && !(*left)->end)) {  // unended or unreadable: recovery's, never overwritten
    if (auto kept = renameToFree(path_, path_ + std::string(kPending), true); !kept) return kept.error();
  }
  return writeSynced(path_, formatJournalHeader(change), false);
}

Result<Done> Journal::step(std::string_view what) {
  return append("step " + std::string(what) + "\n");
}

Result<Done> Journal::end(std::string_view outcome) {
  if (auto a = append("end " + std::string(outcome) + "\n"); !a) return a;
  return discard();
}

Result<Done> Journal::append(std::string_view line) {
  return writeSynced(path_, line, true);
}

Result<std::optional<JournalRecord>> Journal::read() const {
  // Under --root the journal is the tree's: a FIFO there opens at once (O_NONBLOCK) and is refused.
  const support::UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) return std::optional<JournalRecord>{};
    return core::errnoError(errno, path_);
  }
  if (auto regular = sysfs::checkRegular(fd.get(), path_); !regular) return regular.error();
  // A journal is a few hundred bytes: what is past 1 MiB is left unread and the parser judges the rest.
  auto text = support::readWhole(fd.get(), path_, {.bytes = kMaxJournalBytes, .over = support::OverLimit::Stop});
  if (!text) return text.error();
  auto parsed = parseJournal(*text);
  if (!parsed) return core::Error{parsed.error().code, path_, parsed.error().message};
  return std::optional<JournalRecord>{std::move(parsed).value()};
}

std::vector<std::string> Journal::leftoverNames(const std::vector<std::string>& entries, std::string_view name) {
  std::vector<std::string> out;
  if (std::find(entries.begin(), entries.end(), name) != entries.end()) out.emplace_back(name);
  std::vector<std::pair<long, std::string>> pending;
  for (const auto& file : entries) {
    if (long n = pendingNumber(file, name); n > 0) pending.emplace_back(n, file);
  }
  std::sort(pending.begin(), pending.end());
  for (auto& p : pending) out.push_back(std::move(p.second));
  return out;
}

std::vector<std::string> Journal::leftovers() const {
  const std::filesystem::path self(path_);
  std::vector<std::string> entries;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(self.parent_path(), ec)) {
    entries.push_back(entry.path().filename().string());
  }
  std::vector<std::string> out;
  for (const auto& file : leftoverNames(entries, self.filename().string())) {
    out.push_back((self.parent_path() / file).string());
  }
  return out;
}

Result<std::string> Journal::moveAside(long now) const {
  return renameToFree(path_, path_ + ".unreadable-" + std::to_string(now), false);
}

Result<Done> Journal::discard() {
  if (int e = faultAt("unlink", path_)) return core::errnoError(e, path_);
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return core::errnoError(errno, path_);
  return Done{};
}

}  // namespace iommud::adapters::state
