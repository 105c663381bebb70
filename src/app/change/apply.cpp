#include "app/change/apply.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iterator>
#include <map>
#include <set>

#include "adapters/state/atomic_file.hpp"
#include "adapters/state/change_records.hpp"
#include "adapters/state/journal.hpp"
#include "adapters/state/lock.hpp"
#include "adapters/sysfs/host_reader.hpp"
#include "adapters/sysfs/net_owners_reader.hpp"
#include "app/change/current_values.hpp"
#include "core/domain_change.hpp"
#include "core/net_owners.hpp"
#include "core/text.hpp"

namespace iommud::app {

namespace {

using adapters::state::loadRecords;
using adapters::state::saveRecords;
using adapters::sysfs::Root;
using core::ChangeKind;
using OutcomeResult = Outcome::Result;

constexpr const char* kRecordFile = "/changes.json";
constexpr const char* kNotRecorded = "not made: its record could not be written first (see the failure above)";
// The runtime records, copied to the state directory: after a reboot cleared /run/iommud, what
// the copy holds and /run does not is what the reboot undid, and revert says so for each.
constexpr const char* kRuntimeCopyFile = "/runtime-changes.json";

bool sameRecord(const ChangeRecord& a, const ChangeRecord& b) {
  return a.kind == b.kind && a.device == b.device && a.object == b.object && a.key == b.key && a.written == b.written &&
         a.time == b.time;
}

// A modprobe.d file, readable by all as modprobe's own are; its directory made if missing.
core::Result<core::Done> writeModprobeFile(const std::string& path, std::string_view text) {
  if (auto made = adapters::state::makeDirectories(path.substr(0, path.rfind('/'))); !made) return made;
  return adapters::state::writeFileAtomic(path, text, 0644);
}

std::string millis(std::chrono::nanoseconds t) {
  auto tenths = std::chrono::duration_cast<std::chrono::microseconds>(t).count() / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " ms";
}

// Two readings of one setting are the same value: a parameter as the kernel prints it (Y/1), a
// file byte for byte, a type or a NIC value without its newline.
bool sameValue(ChangeKind kind, std::string_view a, std::string_view b) {
  switch (kind) {
    case ChangeKind::ModuleParam: return canonicalParam(a) == canonicalParam(b);
    case ChangeKind::ModprobeConf: return a == b;
    default: return core::trim(a) == core::trim(b);
  }
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

std::string moduleOfFile(const std::string& object) {
  auto base = object.substr(object.rfind('/') + 1);  // iommud-<module>.conf
  return base.substr(7, base.size() - 7 - 5);
}

class Session {
 public:
  // Each records file read once: its records, and its text to write it only when that changes.
  Session(const core::HostFacts& host, ApplyContext& ctx) : host_(host), ctx_(ctx) {
    const auto paths = recordPaths();
    std::vector<ChangeRecord>* lists[] = {&runtime_, &persistent_, &copyOnDisk_};  // as many as paths
    for (size_t i = 0; i < paths.size(); ++i) {
      auto text = ctx.root.readFile(paths[i]);
      if (!text) continue;
      *lists[i] = adapters::state::parseRecords(*text);
      onDisk_[i] = std::move(text).value();
    }
    for (const auto& r : copyOnDisk_) {
      if (!inRuntime(r)) lost_.push_back(r);
    }
  }

  std::vector<Outcome> apply(const core::Plan& plan) {
    settlePending();
    std::set<int> rebound;  // groups whose drivers were rebound: their other settings wait for the next round
    std::map<std::string, std::vector<const core::Change*>> files;
    for (const auto& c : plan.changes) {
      if (c.mode == core::RuleMode::Advise) {
        out(OutcomeResult::Advised, c, c.object + " " + c.key + " " + c.from + " -> " + c.to + ": " + c.tradeOff);
        continue;
      }
      if (c.kind != ChangeKind::Domain && c.group && rebound.contains(*c.group)) {
        out(OutcomeResult::Kept, c, "its driver was just rebound; the next round of apply sets it on the fresh device");
        outcomes_.back().nextRound = true;
        continue;
      }
      switch (c.kind) {
        case ChangeKind::Domain:
          if (domain(c) && !c.irreversible && c.group) rebound.insert(*c.group);
          break;
        case ChangeKind::ModuleParam: param(c); break;
        case ChangeKind::ModprobeConf: files[c.object].push_back(&c); break;
        case ChangeKind::Rings:
        case ChangeKind::Channels:
        case ChangeKind::Coalesce: ethtool(c); break;
      }
    }
    for (const auto& [object, changes] : files) modprobe(object, changes);
    save(Copy::Now);
    return std::move(outcomes_);
  }

  std::vector<Outcome> revert(const std::optional<std::string>& device) {
    std::optional<int> group;
    if (device) {
      if (const auto* d = host_.device(*device)) group = d->group;
    }
    auto concerns = [&](const ChangeRecord& r) {
      return !device || r.device == *device || (group && r.group == group);
    };
    std::vector<ChangeRecord> stillLost;
    for (size_t i = lost_.size(); i-- > 0;) {  // newest first
      const ChangeRecord& r = lost_[i];
      if (!concerns(r)) {
        stillLost.insert(stillLost.begin(), r);
        continue;
      }
      done(r, OutcomeResult::Lost,
           describe(r) +
               ": /run/iommud no longer records it (a reboot cleared it), and the kernel started again "
               "from its own value: nothing to restore; iommuctl status shows the value now",
           true);
    }
    lost_ = std::move(stillLost);
    settlePending();
    for (auto* list : {&persistent_, &runtime_}) {
      // Newest first, each record dropped and saved as soon as its value is back: a process
      // stopped in between leaves a record whose value reads as before, which the next revert
      // drops with nothing to do.
      for (size_t i = list->size(); i-- > 0;) {
        const ChangeRecord r = (*list)[i];
        if (!concerns(r) || !revertOne(r)) continue;
        list->erase(list->begin() + static_cast<std::ptrdiff_t>(i));
        save();
      }
    }
    save(Copy::Now);
    return std::move(outcomes_);
  }

 private:
  bool domain(const core::Change& c) {
    auto to = core::parseDomainType(c.to);
    if (!c.group || !to) return out(OutcomeResult::Failed, c, "the plan names no group or type");
    // The plan's facts may be seconds old: the predicate judges the group as sysfs has it now.
    const auto now = adapters::sysfs::rereadGroup(ctx_.root, host_, *c.group);
    if (now.group(*c.group) == nullptr) {
      return out(OutcomeResult::Skipped, c, c.object + " is gone: its devices were removed before the change began");
    }
    auto prepared = core::prepareDomainChange(now, *c.group, *to);
    if (!prepared) return out(OutcomeResult::Refused, c, prepared.error().message);
    auto journal = journalOf();
    if (!journal) return out(OutcomeResult::Failed, c, journal.error().describe());
    ChangeRecord r = recordOf(c);
    r.irreversible = prepared->live;
    const auto* type = now.group(*c.group)->type ? &*now.group(*c.group)->type : nullptr;
    if (!intend(runtime_, std::move(r), type != nullptr ? std::string(core::toString(*type)) : c.from))
      return out(OutcomeResult::Failed, c, kNotRecorded);
    auto report =
        runDomainChange(*prepared, ctx_.root, ctx_.writer, *journal, host_.kernel.upstream.version, ctx_.hooks);
    settleLast(runtime_);
    if (report.gone) return out(OutcomeResult::Skipped, c, report.summary());
    if (!report.succeeded) return out(OutcomeResult::Failed, c, report.summary());
    return out(OutcomeResult::Done, c,
               report.summary() + " in " + millis(report.totalTime) + " (" + millis(report.kernelTime) +
                   " of it in the kernel's unbind, bind and type writes); " + c.tradeOff);
  }

  bool param(const core::Change& c) {
    const std::string path = moduleParamPath(c.object);
    if (!intend(runtime_, recordOf(c), c.from)) return out(OutcomeResult::Failed, c, kNotRecorded);
    auto w = ctx_.writer.write(path, c.to);
    settleLast(runtime_);
    if (!w) return out(OutcomeResult::Failed, c, w.error().describe());
    auto now = ctx_.root.readFile(path);
    if (!now || canonicalParam(*now) != canonicalParam(c.to)) {
      return out(OutcomeResult::Failed, c,
                 "wrote " + c.to + " but it reads " + (now ? std::string(core::trim(*now)) : "nothing"));
    }
    return out(OutcomeResult::Done, c,
               c.object + " " + c.from + " -> " + c.to + (c.note.empty() ? "" : " (" + c.note + ")"));
  }

  void modprobe(const std::string& object, const std::vector<const core::Change*>& changes) {
    const std::string module = moduleOfFile(object);
    std::map<std::string, std::string> options;
    if (auto m = host_.modules.find(module); m != host_.modules.end()) options = m->second.iommudOptions;
    std::vector<std::string> rules;
    for (const auto* c : changes) {
      options[c->key] = c->to;
      std::string rule = c->rule.name + " (" + c->rule.where.str() + ")";
      if (std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(rule);
    }
    const std::string path = ctx_.paths.modprobeDir + "/iommud-" + module + ".conf";
    auto before = ctx_.root.readFile(path);
    const std::string text = modprobeFileText(module, options, rules);
    // One record per file: the text before the first change iommud made to it, moved to the end.
    auto it =
        std::find_if(persistent_.begin(), persistent_.end(), [&](const ChangeRecord& r) { return r.object == path; });
    ChangeRecord r = recordOf(*changes.front());
    if (it != persistent_.end()) {
      r = *it;
      persistent_.erase(it);
    } else {
      r.object = path;
      r.key = "(file)";
      r.existed = before.ok();
      r.original = before.valueOr(std::string());
    }
    r.written = text;
    if (!intend(persistent_, std::move(r), before.valueOr(std::string()))) {
      for (const auto* c : changes) out(OutcomeResult::Failed, *c, kNotRecorded);
      return;
    }
    auto w = writeModprobeFile(ctx_.root.hostPath(path), text);
    step("write " + path);
    settleLast(persistent_);
    if (!w) {
      for (const auto* c : changes) out(OutcomeResult::Failed, *c, w.error().describe());
      return;
    }
    for (const auto* c : changes) {
      out(OutcomeResult::Done, *c, path + ": " + c->key + "=" + c->to + " (" + c->note + ")");
    }
  }

  bool ethtool(const core::Change& c) {
    if (ctx_.ethtool == nullptr)
      return out(OutcomeResult::Kept, c, "planned, not made: no ethtool access (under --root)");
    const auto start = std::chrono::steady_clock::now();
    const core::NetDev* n = netdev(c);
    const core::EthtoolKey* k = ethtoolKeyOf(c.kind, c.key);
    auto value = k != nullptr ? core::parseEthtoolValue(k->type, c.to) : std::nullopt;
    if (n == nullptr || !value)
      return out(OutcomeResult::Failed, c, "no interface " + c.object + " or no value " + c.to);
    // Kernel time: every netlink round trip (read, set, read-back). A ring change resets the NIC,
    // and the read-back waits for the reset to let go of the RTNL lock.
    std::chrono::nanoseconds kernel{};
    auto timed = [&kernel](auto&& call) {
      const auto t = std::chrono::steady_clock::now();
      auto r = call();
      kernel += std::chrono::steady_clock::now() - t;
      return r;
    };
    auto was = timed([&] { return ctx_.ethtool->get(n->ifindex, c.kind, c.key); });
    if (!was) return out(OutcomeResult::Failed, c, was.error().describe());
    ChangeRecord r = recordOf(c);
    r.original = core::formatEthtoolValue(k->type, *was);
    r.ifindex = n->ifindex;
    if (!intend(runtime_, r, r.original)) return out(OutcomeResult::Failed, c, kNotRecorded);
    auto set = timed([&] { return ctx_.ethtool->set(n->ifindex, c.kind, c.key, *value); });
    auto now =
        set ? timed([&] { return ctx_.ethtool->get(n->ifindex, c.kind, c.key); }) : core::Result<uint32_t>(set.error());
    if (!set || !now || *now != *value) {
      if (!set) {
        settleLast(runtime_);
        return out(OutcomeResult::Failed, c, set.error().describe());
      }
      // The driver took the value and keeps another (e1000e's rx-usecs 7000 reads 7142: its ITR
      // has steps): put the one before back, or the NIC stays at a value nobody asked and no
      // record can restore.
      auto back = ctx_.ethtool->set(n->ifindex, c.kind, c.key, *was);
      settleLast(runtime_);
      const std::string reads =
          now ? core::formatEthtoolValue(k->type, *now) : "nothing (" + now.error().describe() + ")";
      const std::string old = core::formatEthtoolValue(k->type, *was);
      return out(
          OutcomeResult::Failed, c,
          c.object + " " + c.key + ": set " + c.to + " but the driver reads back " + reads +
              (back ? "; put " + old + " back" : "; putting " + old + " back failed: " + back.error().describe()));
    }
    settleLast(runtime_);
    // The clock stops before the message is built: competitors() reads NetworkManager and .link files.
    const auto total = std::chrono::steady_clock::now() - start;
    std::string message = c.object + " " + std::string(core::toString(c.kind)) + " " + c.key + " " + r.original +
                          " -> " + c.to + " in " + millis(total) + " (" + millis(kernel) +
                          " of it in the kernel's read, set and read-back)" + (c.note.empty() ? "" : "; " + c.note);
    message += competitors(c.device, c.object, c.kind, c.key);
    return out(OutcomeResult::Done, c, std::move(message));
  }

  // Restores one record; false keeps it (drift, refusal, failure, a change still pending).
  bool revertOne(const ChangeRecord& r) {
    if (r.pending) {
      return done(r, OutcomeResult::Drift,
                  describe(r) + ": a process making this change stopped before it was over, and " + r.object + " " +
                      r.key + " reads neither the value before nor the one it was writing; left alone",
                  false);
    }
    // Restored by a process stopped before it dropped the record: nothing left to do.
    const auto seen = observe(r);
    if (seen.state == Observed::State::Value && sameValue(r.kind, seen.value, r.original)) {
      return done(r, OutcomeResult::Done,
                  (r.kind == ChangeKind::ModprobeConf
                       ? r.object + " holds its text from before iommud again"
                       : describe(r) + ": reads " + std::string(core::trim(seen.value)) + " again") +
                      ": nothing to do",
                  true);
    }
    if (seen.state == Observed::State::Gone && r.kind == ChangeKind::ModprobeConf && !r.existed) {
      return done(r, OutcomeResult::Done, r.object + " is already removed: nothing to do", true);
    }
    switch (r.kind) {
      case ChangeKind::Domain: return revertDomain(r);
      case ChangeKind::ModuleParam: return revertParam(r);
      case ChangeKind::ModprobeConf: return revertModprobe(r);
      case ChangeKind::Rings:
      case ChangeKind::Channels:
      case ChangeKind::Coalesce: return revertEthtool(r);
    }
    return false;
  }

  bool revertParam(const ChangeRecord& r) {
    const std::string path = moduleParamPath(r.object);
    auto now = ctx_.root.readFile(path);
    if (!now) return done(r, OutcomeResult::Drift, "it cannot be read any more (module unloaded?); left alone", true);
    if (canonicalParam(*now) != canonicalParam(r.written)) return drift(r, std::string(core::trim(*now)));
    if (auto w = ctx_.writer.write(path, r.original); !w)
      return done(r, OutcomeResult::Failed, w.error().describe(), false);
    return done(r, OutcomeResult::Done, r.object + " " + r.written + " -> " + r.original, true);
  }

  bool revertModprobe(const ChangeRecord& r) {
    auto now = ctx_.root.readFile(r.object);
    if (now.valueOr(std::string()) != r.written) return drift(r, "edited since iommud wrote it");
    const std::string host = ctx_.root.hostPath(r.object);
    auto restored = r.existed ? writeModprobeFile(host, r.original) : adapters::state::removeFile(host);
    step((r.existed ? "write " : "remove ") + r.object);
    if (!restored) return done(r, OutcomeResult::Failed, restored.error().describe(), false);
    return done(r, OutcomeResult::Done, r.object + (r.existed ? " restored" : " removed"), true);
  }

  bool revertEthtool(const ChangeRecord& r) {
    if (ctx_.ethtool == nullptr) return done(r, OutcomeResult::Kept, "no ethtool access (under --root)", false);
    const core::EthtoolKey* k = ethtoolKeyOf(r.kind, r.key);
    auto written = k != nullptr ? core::parseEthtoolValue(k->type, r.written) : std::nullopt;
    auto original = k != nullptr ? core::parseEthtoolValue(k->type, r.original) : std::nullopt;
    auto now = ctx_.ethtool->get(r.ifindex, r.kind, r.key);
    if (!now) return done(r, OutcomeResult::Drift, now.error().describe() + "; left alone", true);
    if (!written || !original || *now != *written) {
      return drift(r, std::to_string(*now), competitors(r.device, r.object, r.kind, r.key));
    }
    if (auto s = ctx_.ethtool->set(r.ifindex, r.kind, r.key, *original); !s) {
      return done(r, OutcomeResult::Failed, s.error().describe(), false);
    }
    return done(
        r, OutcomeResult::Done,
        r.object + " " + r.key + " " + r.written + " -> " + r.original + competitors(r.device, r.object, r.kind, r.key),
        true);
  }

  bool revertDomain(const ChangeRecord& r) {
    if (!r.group) return false;
    const core::Group* g = host_.group(*r.group);
    if (g == nullptr || !g->type)
      return done(r, OutcomeResult::Drift, "the group is gone (device removed?); forgotten", true);
    if (std::string(core::toString(*g->type)) != r.written) return drift(r, std::string(core::toString(*g->type)));
    if (r.irreversible) {
      return done(r, OutcomeResult::Kept,
                  "DMA-FQ set with drivers bound stays until the devices are unbound or the machine reboots", false);
    }
    auto original = core::parseDomainType(r.original);
    if (!original) return false;
    const auto now = adapters::sysfs::rereadGroup(ctx_.root, host_, *r.group);
    if (now.group(*r.group) == nullptr)
      return done(r, OutcomeResult::Drift, "the group is gone (device removed?); forgotten", true);
    auto prepared = core::prepareDomainChange(now, *r.group, *original);
    if (!prepared) return done(r, OutcomeResult::Refused, prepared.error().message, false);
    auto journal = journalOf();
    if (!journal) return done(r, OutcomeResult::Failed, journal.error().describe(), false);
    auto report =
        runDomainChange(*prepared, ctx_.root, ctx_.writer, *journal, host_.kernel.upstream.version, ctx_.hooks);
    return done(r, report.succeeded ? OutcomeResult::Done : OutcomeResult::Failed, report.summary(), report.succeeded);
  }

  // Who else sets this NIC value (NetworkManager, a .link file): it will fight the change.
  std::string competitors(const std::string& device, const std::string& ifname, ChangeKind kind,
                          const std::string& key) {
    const auto* d = host_.device(device);
    if (d == nullptr) return "";
    auto n =
        std::find_if(d->netdevs.begin(), d->netdevs.end(), [&](const core::NetDev& x) { return x.name == ifname; });
    if (n == d->netdevs.end()) return "";
    if (!owners_) owners_ = adapters::sysfs::readNetOwnerSources(ctx_.root);
    auto setting = kind == ChangeKind::Rings      ? core::NetSettingKind::Rings
                   : kind == ChangeKind::Channels ? core::NetSettingKind::Channels
                                                  : core::NetSettingKind::Coalesce;
    auto report = core::competingOwners(*owners_, adapters::sysfs::readNicIdentity(ctx_.root, *d, *n));
    std::string out;
    for (const auto& o : report.of(setting, key)) {
      out += "; " + std::string(core::toString(o.owner)) + (o.certainty == core::Certainty::Applies ? "" : " may") +
             " also set" + (o.certainty == core::Certainty::Applies ? "s" : "") + " it (" + o.setting.key + "=" +
             o.setting.value + " in " + o.setting.file + ":" + std::to_string(o.setting.line) + ")";
    }
    return out;
  }

  // The transaction journal, in a run directory that exists.
  core::Result<adapters::state::Journal> journalOf() const {
    const std::string dir = ctx_.root.hostPath(ctx_.paths.runDir);
    if (auto made = adapters::state::makeDirectories(dir); !made) return made.error();
    return adapters::state::Journal(dir + "/transaction.journal");
  }

  // `also`: who else sets the value, for NIC settings.
  bool drift(const ChangeRecord& r, const std::string& now, const std::string& also = "") {
    return done(r, OutcomeResult::Drift,
                r.object + " " + r.key + " is now " + now + ", not the " + r.written +
                    " iommud wrote: something else changed it; left alone" + also,
                false);
  }

  bool done(const ChangeRecord& r, OutcomeResult result, const std::string& message, bool forget) {
    outcomes_.push_back(Outcome{result, r.kind, r.device, r.object, r.key, message, r.group, r.rule, r.ruleWhere,
                                r.written, r.original});
    outcomes_.back().members = membersOf(r.kind, r.group);
    return forget;
  }

  // A domain change's group, as the host was before it; nothing for other changes.
  std::vector<std::string> membersOf(ChangeKind kind, const std::optional<int>& group) const {
    if (kind != ChangeKind::Domain || !group) return {};
    const core::Group* g = host_.group(*group);
    return g != nullptr ? g->devices : std::vector<std::string>{};
  }

  const core::NetDev* netdev(const core::Change& c) const {
    const auto* d = host_.device(c.device);
    if (d == nullptr) return nullptr;
    auto it =
        std::find_if(d->netdevs.begin(), d->netdevs.end(), [&](const core::NetDev& n) { return n.name == c.object; });
    return it == d->netdevs.end() ? nullptr : &*it;
  }

  // Write-ahead: the record is on disk, pending, before the change touches the host.
  // False when it could not be saved: then the change must not be made (save said why).
  [[nodiscard]] bool intend(std::vector<ChangeRecord>& list, ChangeRecord r, std::string before) {
    auto was = list;
    r.pending = true;
    r.before = std::move(before);
    remember(list, std::move(r));
    if (save()) return true;
    list = std::move(was);
    save();
    return false;
  }

  // Settles `list`'s last record (intend's) by what the host shows, once its change is over.
  void settleLast(std::vector<ChangeRecord>& list) {
    if (!list.empty() && list.back().pending) settleAt(list, list.size() - 1);
    save();
  }

  // The pending records a stopped process left, settled before anything else is done.
  void settlePending() {
    for (auto* list : {&runtime_, &persistent_}) {
      for (size_t i = list->size(); i-- > 0;) {
        if ((*list)[i].pending) settleAt(*list, i);
      }
    }
    save();
  }

  void settleAt(std::vector<ChangeRecord>& list, size_t i) {
    ChangeRecord& r = list[i];
    switch (settle(r, observe(r))) {
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

  // A step that changed a file on disk, for the tests that kill the process at each one.
  void step(const std::string& name) const {
    if (ctx_.hooks.afterStep) ctx_.hooks.afterStep(name);
  }

  Observed observe(const ChangeRecord& r) const {
    return observeRecords(ctx_.root, {r}, ctx_.ethtool, "no ethtool access (under --root)").front();
  }

  ChangeRecord recordOf(const core::Change& c) const {
    ChangeRecord r;
    r.kind = c.kind;
    r.device = c.device;
    r.group = c.group;
    r.object = c.object;
    r.key = c.key;
    r.original = c.from;
    r.written = c.to;
    r.rule = c.rule.name;
    r.ruleWhere = c.rule.where.str();
    r.time = ctx_.now ? ctx_.now() : "";
    return r;
  }

  // One record per setting: a setting changed again keeps the value iommud first found, when
  // nothing else changed it in between (the new change starts from what iommud wrote), so that
  // revert restores that; otherwise the new record replaces the stale one.
  static void remember(std::vector<ChangeRecord>& list, ChangeRecord r) {
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

  bool out(OutcomeResult result, const core::Change& c, std::string message) {
    outcomes_.push_back(Outcome{result, c.kind, c.device, c.object, c.key, std::move(message), c.group, c.rule.name,
                                c.rule.where.str(), c.from, c.to, c.risk, c.tradeOff});
    outcomes_.back().members = membersOf(c.kind, c.group);
    return result == OutcomeResult::Done;
  }

  // "group 20 type DMA-FQ -> identity (rule nvme-identity, 2026-11-21T12:00:00Z)".
  static std::string describe(const ChangeRecord& r) {
    std::string what = r.kind == ChangeKind::Domain && r.group ? "group " + std::to_string(*r.group) + " type"
                       : r.kind == ChangeKind::ModuleParam     ? r.object
                                                               : r.object + " " + r.key;
    return what + " " + r.original + " -> " + r.written + " (" + (r.rule.empty() ? "" : "rule " + r.rule + ", ") +
           r.time + ")";
  }

  // /run's records, the state directory's, and the state directory's copy of /run's.
  [[nodiscard]] std::array<std::string, 3> recordPaths() const {
    return {ctx_.paths.runDir + kRecordFile, ctx_.paths.stateDir + kRecordFile, ctx_.paths.stateDir + kRuntimeCopyFile};
  }

  [[nodiscard]] bool inRuntime(const ChangeRecord& r) const {
    return std::any_of(runtime_.begin(), runtime_.end(), [&](const ChangeRecord& x) { return sameRecord(x, r); });
  }

  // The state directory's copy holds a record that is neither in /run nor lost to a reboot: after
  // a crash, revert would call that change lost.
  [[nodiscard]] bool copyWouldLie() const {
    return std::any_of(copyOnDisk_.begin(), copyOnDisk_.end(), [&](const ChangeRecord& r) {
      return !inRuntime(r) && std::none_of(lost_.begin(), lost_.end(), [&](const auto& l) { return sameRecord(l, r); });
    });
  }

  // When the state directory's copy of /run's records is written (see save).
  enum class Copy {
    IfItWouldLie,  // only if it holds a record /run no longer has, which it would call lost
    Now,           // whenever its text changes: the session's last save
  };

  // Each file whose text changes (a damaged one is written again). The copy of the runtime
  // records is not synced: it only says, after a reboot, what the reboot undid, and a crash may
  // leave it stale or empty (then revert says nothing of what the reboot undid). /run is a tmpfs;
  // the state directory is on disk, where an fsync costs milliseconds at every change, and so
  // does the rename that replaces a file on a filesystem mounted with `discard`. So the copy is
  // written once, at the end of the session, and before that only when a record left /run: a
  // copy that lacks the newest records is stale, one that holds a record /run dropped would, after
  // a crash, have revert call that change lost to a reboot.
  bool save(Copy copyWhen = Copy::IfItWouldLie) {
    bool saved = true;
    using adapters::state::Durability;
    std::vector<ChangeRecord> copy = lost_;
    copy.insert(copy.end(), runtime_.begin(), runtime_.end());
    const std::vector<ChangeRecord>* lists[] = {&runtime_, &persistent_, &copy};
    const auto paths = recordPaths();
    for (size_t i = 0; i < std::size(lists); ++i) {  // as many as paths
      if (i == 2 && copyWhen == Copy::IfItWouldLie && !copyWouldLie()) continue;
      std::string text = adapters::state::recordsText(*lists[i]);
      if (onDisk_[i] ? *onDisk_[i] == text : lists[i]->empty()) continue;
      if (auto s = saveRecords(ctx_.root, paths[i], *lists[i], i == 2 ? Durability::Unsynced : Durability::Synced);
          !s) {
        outcomes_.push_back(Outcome{OutcomeResult::Failed, ChangeKind::Domain, "", paths[i], "",
                                    "cannot record: " + s.error().describe()});
        saved = false;
        continue;
      }
      onDisk_[i] = std::move(text);
      if (i == 2) copyOnDisk_ = copy;
      step("save " + paths[i]);
    }
    return saved;
  }

  const core::HostFacts& host_;
  ApplyContext& ctx_;
  std::optional<core::NetOwnerSources> owners_;  // read once, when a NIC value is first touched
  std::vector<ChangeRecord> runtime_, persistent_;
  std::vector<ChangeRecord> lost_;                    // in the state directory's copy, no longer in /run
  std::vector<ChangeRecord> copyOnDisk_;              // what the state directory's copy holds
  std::array<std::optional<std::string>, 3> onDisk_;  // recordPaths()' text as read; none: no file
  std::vector<Outcome> outcomes_;
};

}  // namespace

std::string utcNow() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string_view toString(Outcome::Result r) {
  return core::nameOf(kOutcomeResultNames, r);
}

std::vector<Outcome> applyPlan(const core::Plan& plan, const core::HostFacts& host, ApplyContext& ctx) {
  return Session(host, ctx).apply(plan);
}

std::vector<Outcome> revertChanges(const std::optional<std::string>& device, const core::HostFacts& host,
                                   ApplyContext& ctx) {
  return Session(host, ctx).revert(device);
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

std::vector<ChangeRecord> readRecords(const Root& root, const StatePaths& paths) {
  auto out = loadRecords(root, paths.stateDir + kRecordFile);
  auto runtime = loadRecords(root, paths.runDir + kRecordFile);
  out.insert(out.end(), runtime.begin(), runtime.end());
  return out;
}

std::optional<core::Error> recordsUnreadable(const Root& root, const StatePaths& paths) {
  for (const auto& dir : {paths.stateDir, paths.runDir}) {
    auto text = root.readFile(dir + kRecordFile);
    if (!text && text.error().code != ENOENT) return text.error();
  }
  return std::nullopt;
}

std::string modprobeFileText(const std::string& module, const std::map<std::string, std::string>& options,
                             const std::vector<std::string>& rules) {
  std::string out = "# Written by iommud: do not edit; `iommuctl revert` restores what was here before.\n";
  for (const auto& r : rules) out += "# rule " + r + "\n";
  out += "options " + module;
  for (const auto& [k, v] : options) out += " " + k + "=" + v;
  return out + "\n";
}

}  // namespace iommud::app
