#include "app/change/record_store.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>

#include "adapters/state/atomic_file.hpp"
#include "adapters/state/change_records.hpp"
#include "core/text.hpp"

namespace iommud::app {

namespace {

using adapters::state::RecordsFile;
using adapters::state::sameRecord;
using adapters::sysfs::Root;
using core::ChangeKind;

constexpr const char* kRecordFile = "/changes.json";
// The runtime records, copied to the state directory: after a reboot cleared /run/iommud, what
// the copy holds and /run does not is what the reboot undid, and revert says so for each.
constexpr const char* kRuntimeCopyFile = "/runtime-changes.json";
constexpr std::string_view kAside = ".damaged-";
constexpr std::string_view kReverted = ".reverted";

// A records file's text: nullopt when there is none. On the live host never through a link; under
// a root, inside it (Root's contained open). Regular files only, at most kMaxRecordsBytes.
core::Result<std::optional<std::string>> readText(const Root& root, const std::string& path) {
  if (root.isLive()) return adapters::state::readOwnFile(path, adapters::state::kMaxRecordsBytes);
  // iommud never writes a link there: one is not followed, inside the root or not.
  struct stat st {};
  if (::lstat(root.hostPath(path).c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return core::Error{ELOOP, root.hostPath(path), "a symbolic link, which iommud never writes: not followed"};
  auto text = root.readFile(path, adapters::state::kMaxRecordsBytes);
  if (!text) {
    if (text.error().code == ENOENT) return std::optional<std::string>{};
    return text.error();
  }
  return std::optional<std::string>{std::move(text).value()};
}

// What reading a records file found: nothing, its records (whole or not), or why it cannot be read.
struct Read {
  std::optional<RecordsFile> file;  // nullopt: absent or unreadable
  std::optional<core::Error> error;
  std::string text;
};

Read readAt(const Root& root, const std::string& path) {
  Read out;
  auto text = readText(root, path);
  // No file where its directory is not one (a file in the way, which a save reports): none.
  if (!text && text.error().code == ENOTDIR) return out;
  if (!text) {
    out.error = text.error();
  } else if (*text) {
    out.file = adapters::state::parseRecordsFile(**text);
    out.text = std::move(**text);
  }
  return out;
}

// Not understood at all: not a regular file, too large, an I/O error. EACCES is a reader's (not
// root), not damage.
bool damagedRead(const Read& r) {
  return (r.error && r.error->code != EACCES) || (r.file && !r.file->whole());
}

std::vector<std::string> whatOf(const Read& r) {
  if (r.error) return {"it cannot be read: " + r.error->describe()};
  return r.file->damage;
}

// The files an earlier run moved aside ("changes.json.damaged-TIME"), not yet given back.
std::vector<core::DamagedStateFile> keptAside(const Root& root, const StatePaths& paths) {
  std::vector<core::DamagedStateFile> out;
  for (const auto& dir : {paths.runDir, paths.stateDir}) {
    auto names = root.listDir(dir);
    if (!names) continue;
    for (const auto& name : *names) {
      const auto aside = name.find(kAside);
      if (aside == std::string::npos || name.ends_with(kReverted)) continue;
      const std::string base = "/" + name.substr(0, aside);
      if (base != kRecordFile && base != kRuntimeCopyFile) continue;
      const std::string path = dir + "/" + name;
      auto read = readAt(root, path);
      core::DamagedStateFile d{dir + base, {}, path, false};
      d.what = read.error || read.file ? whatOf(read) : std::vector<std::string>{"it is gone"};
      if (d.what.empty()) d.what.emplace_back("it was moved aside by an earlier run");
      if (read.file) d.what.push_back(std::to_string(read.file->records.size()) + " intact records in it");
      out.push_back(std::move(d));
    }
  }
  return out;
}

// "2026-11-21T12:00:00Z" -> "20261121T120000Z", for a file name.
std::string stamp(std::string_view now) {
  std::string out;
  std::copy_if(now.begin(), now.end(), std::back_inserter(out), [](char c) { return c != ':' && c != '-'; });
  return out.empty() ? "unknown-time" : out;
}

// Records of `from` that `in` lacks.
std::vector<ChangeRecord> missingFrom(const std::vector<ChangeRecord>& in, const std::vector<ChangeRecord>& from) {
  std::vector<ChangeRecord> out;
  for (const auto& r : from) {
    if (std::none_of(in.begin(), in.end(), [&](const ChangeRecord& x) { return sameRecord(x, r); })) out.push_back(r);
  }
  return out;
}

// What becomes of a pending record, from what the host shows for its setting now.
enum class Settled {
  Made,     // the setting reads what the change wrote: a record like any other
  NotMade,  // it reads what it read before the change: the record is as it was before
  Unknown,  // neither, or it cannot be read: left pending (revert leaves such a value alone)
};

Settled settle(const ChangeRecord& r, const Observed& now) {
  if (now.state == Observed::State::Unreadable) return Settled::Unknown;
  // A removed device, an unloaded module or a group that is gone keeps nothing iommud wrote; a
  // modprobe.d file that is not there reads as none ("": iommud's own always have text).
  if (now.state == Observed::State::Gone && r.kind != ChangeKind::ModprobeConf) return Settled::NotMade;
  if (now.state == Observed::State::Value && sameValue(r.kind, now.value, r.written)) return Settled::Made;
  return sameValue(r.kind, now.value, r.before) ? Settled::NotMade : Settled::Unknown;
}

}  // namespace

bool sameValue(ChangeKind kind, std::string_view a, std::string_view b) {
  switch (kind) {
    case ChangeKind::ModuleParam: return canonicalParam(a) == canonicalParam(b);
    case ChangeKind::ModprobeConf: return a == b;
    default: return core::trim(a) == core::trim(b);
  }
}

RecordsView readRecordsView(const Root& root, const StatePaths& paths) {
  RecordsView out;
  const std::string files[] = {paths.stateDir + kRecordFile, paths.runDir + kRecordFile,
                               paths.stateDir + kRuntimeCopyFile};
  Read reads[3];
  for (size_t i = 0; i < 3; ++i) {
    reads[i] = readAt(root, files[i]);
    if (reads[i].error && reads[i].error->code == EACCES && !out.unreadable) out.unreadable = reads[i].error;
    if (damagedRead(reads[i])) out.damage.push_back({files[i], whatOf(reads[i]), "", false});
  }
  for (size_t i = 0; i < 2; ++i) {
    if (reads[i].file)
      out.records.insert(out.records.end(), reads[i].file->records.begin(), reads[i].file->records.end());
  }
  // /run's file there but not understood whole: the copy's records it lacks are not lost to a
  // reboot but most likely still in effect, as the writer takes them too (RecordStore).
  if (damagedRead(reads[1]) && reads[2].file) {
    auto runtime = reads[1].file ? reads[1].file->records : std::vector<ChangeRecord>{};
    auto back = missingFrom(runtime, reads[2].file->records);
    out.records.insert(out.records.end(), back.begin(), back.end());
  }
  auto aside = keptAside(root, paths);
  out.damage.insert(out.damage.end(), aside.begin(), aside.end());
  return out;
}

std::vector<ChangeRecord> readRecords(const Root& root, const StatePaths& paths) {
  return readRecordsView(root, paths).records;
}

RecordStore::RecordStore(const Root& root, StatePaths paths, Hooks hooks, const std::string& now)
    : root_(root), paths_(std::move(paths)), hooks_(std::move(hooks)) {
  sweepTemporaries();
  for (size_t i = 0; i < 3; ++i) load(i, now);
  if (damagedNow_[0]) {
    // /run's file was not understood whole: what the copy holds and /run's intact part lacks was
    // most likely still in effect when /run's was damaged (a reboot would have cleared both).
    for (auto& r : missingFrom(runtime_, copyOnDisk_)) runtime_.push_back(std::move(r));
  } else {
    for (const auto& r : copyOnDisk_) {
      if (!inRuntime(r)) lost_.push_back(r);
    }
  }
  auto aside = keptAside(root_, paths_);
  for (auto& d : aside) {
    if (std::none_of(damage_.begin(), damage_.end(), [&](const auto& x) { return x.keptAs == d.keptAs; }))
      damage_.push_back(std::move(d));
  }
  if (std::find(damagedNow_.begin(), damagedNow_.end(), true) != damagedNow_.end()) save();
}

// The temporaries of a writer killed while it saved (".changes.json.tmp.RANDOM", writeFileAtomic's):
// the writer lock is held, so no other writer is saving now.
void RecordStore::sweepTemporaries() const {
  for (const auto& dir : {paths_.runDir, paths_.stateDir}) {
    auto names = root_.listDir(dir);
    if (!names) continue;
    for (const auto& name : *names) {
      if (name.starts_with(".changes.json.tmp.") || name.starts_with(".runtime-changes.json.tmp."))
        (void)adapters::state::removeFile(root_.hostPath(dir + "/" + name));
    }
  }
}

// Each records file read once: its records, and its text to write it only when that changes. One
// not understood whole is moved aside, never written over; its intact records are kept.
void RecordStore::load(size_t i, const std::string& now) {
  std::vector<ChangeRecord>* lists[] = {&runtime_, &persistent_, &copyOnDisk_};
  const std::string path = recordPaths()[i];
  auto read = readAt(root_, path);
  if (!read.error && !read.file) return;  // none
  if (!damagedRead(read) && read.file) {
    *lists[i] = std::move(read.file->records);
    onDisk_[i] = std::move(read.text);
    return;
  }
  damagedNow_[i] = true;
  if (read.file) *lists[i] = std::move(read.file->records);
  const std::string host = root_.hostPath(path);
  core::DamagedStateFile d{path, whatOf(read), "", !lists[i]->empty()};
  auto moved = adapters::state::renameToFree(host, host + std::string(kAside) + stamp(now), false);
  if (moved) {
    d.keptAs = path + moved->substr(host.size());
    movedNow_.push_back(d);
    if (hooks_.step) hooks_.step("move aside " + path);
  } else {
    frozen_[i] = true;
    d.salvaged = false;
    d.what.push_back("it could not be moved aside (" + moved.error().describe() + "), so it is not written");
  }
  damage_.push_back(std::move(d));
}

bool RecordStore::intend(List which, ChangeRecord r, std::string before) {
  auto& list = this->list(which);
  auto was = list;
  r.pending = true;
  r.before = std::move(before);
  remember(list, std::move(r));
  if (save()) return true;
  list = std::move(was);
  save();
  return false;
}

void RecordStore::settleLast(List which) {
  auto& list = this->list(which);
  if (!list.empty() && list.back().pending) settleAt(list, list.size() - 1);
  save();
}

void RecordStore::settlePending() {
  for (auto* list : {&runtime_, &persistent_}) {
    for (size_t i = list->size(); i-- > 0;) {
      if ((*list)[i].pending) settleAt(*list, i);
    }
  }
  save();
}

void RecordStore::settleAt(std::vector<ChangeRecord>& list, size_t i) const {
  ChangeRecord& r = list[i];
  switch (settle(r, hooks_.observe(r))) {
    case Settled::Made:
      r.pending = false;
      r.before.clear();
      return;
    case Settled::NotMade:
      // As before the change: no record if it was the first, else the earlier change's.
      if (sameValue(r.kind, r.before, r.original)) {
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
      r.written = r.before;
      r.pending = false;
      r.before.clear();
      return;
    case Settled::Unknown: return;
  }
}

void RecordStore::adopt(const std::vector<ChangeRecord>& records) {
  for (const auto& r : records) {
    auto& list = r.kind == ChangeKind::ModprobeConf ? persistent_ : runtime_;
    if (std::none_of(list.begin(), list.end(), [&](const ChangeRecord& x) { return sameRecord(x, r); }))
      list.push_back(r);
  }
}

// One record per setting: a setting changed again keeps the value iommud first found, when
// nothing else changed it in between (the new change starts from what iommud wrote), so that
// revert restores that; otherwise the new record replaces the stale one.
void RecordStore::remember(std::vector<ChangeRecord>& list, ChangeRecord r) {
  auto same = std::find_if(list.begin(), list.end(), [&](const ChangeRecord& x) {
    return x.kind == r.kind && x.device == r.device && x.object == r.object && x.key == r.key;
  });
  if (same == list.end()) {
    list.push_back(std::move(r));
    return;
  }
  if (same->written == r.original) {
    r.original = std::move(same->original);
    r.existed = same->existed;
  }
  list.erase(same);
  list.push_back(std::move(r));
}

// /run's records, the state directory's, and the state directory's copy of /run's.
std::array<std::string, 3> RecordStore::recordPaths() const {
  return {paths_.runDir + kRecordFile, paths_.stateDir + kRecordFile, paths_.stateDir + kRuntimeCopyFile};
}

bool RecordStore::inRuntime(const ChangeRecord& r) const {
  return std::any_of(runtime_.begin(), runtime_.end(), [&](const ChangeRecord& x) { return sameRecord(x, r); });
}

// The state directory's copy holds a record that is neither in /run nor lost to a reboot: after
// a crash, revert would call that change lost.
bool RecordStore::copyWouldLie() const {
  return std::any_of(copyOnDisk_.begin(), copyOnDisk_.end(), [&](const ChangeRecord& r) {
    return !inRuntime(r) && std::none_of(lost_.begin(), lost_.end(), [&](const auto& l) { return sameRecord(l, r); });
  });
}

// Each file whose text changes (one moved aside is written anew). The copy of the runtime
// records is not synced: it only says, after a reboot, what the reboot undid, and a crash may
// leave it stale or empty (then revert says nothing of what the reboot undid). /run is a tmpfs;
// the state directory is on disk, where an fsync costs milliseconds at every change, and so
// does the rename that replaces a file on a filesystem mounted with `discard`. So the copy is
// written once, at the end of the session, and before that only when a record left /run: a
// copy that lacks the newest records is stale, one that holds a record /run dropped would, after
// a crash, have revert call that change lost to a reboot.
bool RecordStore::save(Copy copyWhen) {
  bool saved = true;
  using adapters::state::Durability;
  std::vector<ChangeRecord> copy = lost_;
  copy.insert(copy.end(), runtime_.begin(), runtime_.end());
  const std::vector<ChangeRecord>* lists[] = {&runtime_, &persistent_, &copy};
  const auto paths = recordPaths();
  for (size_t i = 0; i < std::size(lists); ++i) {  // as many as paths
    if (i == 2 && copyWhen == Copy::IfItWouldLie && !copyWouldLie()) continue;
    auto made = adapters::state::recordsText(*lists[i]);
    if (!made) {
      hooks_.failed(paths[i], core::Error{made.error().code, paths[i], made.error().message});
      saved = false;
      continue;
    }
    std::string text = std::move(made).value();
    if (onDisk_[i] ? *onDisk_[i] == text : lists[i]->empty() && !damagedNow_[i]) continue;
    if (frozen_[i]) {
      hooks_.failed(paths[i],
                    core::Error{EROFS, paths[i], "not understood whole and not moved aside: never written over"});
      saved = false;
      continue;
    }
    if (auto s = adapters::state::saveRecords(root_, paths[i], *lists[i],
                                              i == 2 ? Durability::Unsynced : Durability::Synced);
        !s) {
      hooks_.failed(paths[i], s.error());
      saved = false;
      continue;
    }
    onDisk_[i] = std::move(text);
    if (i == 2) copyOnDisk_ = copy;
    if (hooks_.step) hooks_.step("save " + paths[i]);
  }
  return saved;
}

core::Result<std::pair<std::vector<ChangeRecord>, std::vector<std::string>>> readKeptRecords(const std::string& path) {
  auto read = adapters::state::readRecordsFile(path);
  if (!read) return read.error();
  if (!*read) return core::Error{ENOENT, path, "No such file or directory"};
  return std::make_pair(std::move((*read)->records), std::move((*read)->damage));
}

core::Result<std::string> markReverted(const std::string& path) {
  return adapters::state::renameToFree(path, path + std::string(kReverted), false);
}

std::optional<std::string> directoryFromEnvironment(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  std::string s(v);
  return s.substr(0, s.find(':'));
}

StatePaths statePathsFromEnvironment(const std::string& prefix) {
  StatePaths p;
  if (auto d = directoryFromEnvironment((prefix + "RUNTIME_DIRECTORY").c_str())) p.runDir = *d;
  if (auto d = directoryFromEnvironment((prefix + "STATE_DIRECTORY").c_str())) p.stateDir = *d;
  return p;
}

}  // namespace iommud::app
