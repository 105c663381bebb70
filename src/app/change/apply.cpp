#include "app/change/apply.hpp"

#include <algorithm>
#include <array>
#include <cctype>
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
#include "app/change/record_store.hpp"
#include "core/domain_change.hpp"
#include "core/net_owners.hpp"
#include "core/text.hpp"
#include "support/utc_time.hpp"

namespace iommud::app {

namespace {

using adapters::sysfs::Root;
using core::ChangeKind;
using OutcomeResult = Outcome::Result;
using List = RecordStore::List;

constexpr const char* kNotRecorded = "not made: its record could not be written first (see the failure above)";
// A modprobe.d file, readable by all as modprobe's own are; its directory made if missing.
core::Result<core::Done> writeModprobeFile(const std::string& path, std::string_view text) {
  if (auto made = adapters::state::makeDirectories(path.substr(0, path.rfind('/'))); !made) return made;
  return adapters::state::writeFileAtomic(path, text, 0644);
}

std::string millis(std::chrono::nanoseconds t) {
  auto tenths = std::chrono::duration_cast<std::chrono::microseconds>(t).count() / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " ms";
}

std::string moduleOfFile(const std::string& object) {
  auto base = object.substr(object.rfind('/') + 1);  // iommud-<module>.conf
  return base.substr(7, base.size() - 7 - 5);
}

class Session {
 public:
  Session(const core::HostFacts& host, ApplyContext& ctx)
      : host_(host),
        ctx_(ctx),
        store_(ctx.root, ctx.paths,
               {[this](const ChangeRecord& r) { return observe(r); },
                [this](const std::string& path, const core::Error& e) {
                  outcomes_.push_back(Outcome{OutcomeResult::Failed, ChangeKind::Domain, "", path, "",
                                              "cannot record: " + e.describe()});
                },
                [this](const std::string& name) { step(name); }},
               ctx.now ? ctx.now() : support::utcNow()) {
    for (const auto& d : store_.movedNow()) {
      std::string what;
      for (const auto& w : d.what) what += (what.empty() ? "" : "; ") + w;
      outcomes_.push_back(Outcome{OutcomeResult::Failed, ChangeKind::Domain, "", d.file, "",
                                  d.file + " was not understood whole (" + what + "): moved aside as " + d.keptAs +
                                      ", never written over" +
                                      (d.salvaged ? "; the records it could read are carried over" : "")});
    }
  }

  std::vector<Outcome> apply(const core::Plan& plan) {
    store_.settlePending();
    std::set<int> rebound;  // groups whose drivers were rebound: their other settings wait for the next round
    std::map<std::string, std::vector<const core::Change*>> files;
    for (const auto& c : plan.changes) {
      if (c.mode == core::RuleMode::Advise) {
        out(OutcomeResult::Advised, c, c.object + " " + c.key + " " + c.from + " -> " + c.to + ": " + c.tradeOff);
        continue;
      }
      if (store_.damaged() && c.risk != core::Risk::None) {
        out(OutcomeResult::Refused, c,
            c.object + " " + c.key + " " + c.from + " -> " + c.to +
                " not made: it gives up protection, and a records file of iommud's is not understood whole (" +
                core::describeDamage(store_.damage()) +
                "): every such change must be possible to take back first; iommuctl status says what to do");
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
    store_.save(RecordStore::Copy::Now);
    return std::move(outcomes_);
  }

  // revert --from: the intact records of a file kept aside, given back with the store's own;
  // the file renamed *.reverted once none of them is left.
  std::vector<Outcome> revertKept(const std::string& file, const std::optional<std::string>& device) {
    auto kept = readKeptRecords(file);
    if (!kept) {
      outcomes_.push_back(Outcome{OutcomeResult::Failed, ChangeKind::Domain, "", file, "",
                                  "cannot read " + file + ": " + kept.error().describe()});
      return std::move(outcomes_);
    }
    const auto& records = kept->first;
    const auto& damage = kept->second;
    for (const auto& d : damage) {
      outcomes_.push_back(Outcome{OutcomeResult::Skipped, ChangeKind::Domain, "", file, "",
                                  file + ": " + d + ": what of it cannot be read is not given back"});
    }
    store_.adopt(records);
    auto out = revert(device);
    const auto left = [&] {
      for (auto which : {List::Runtime, List::Persistent}) {
        for (const auto& r : store_.list(which)) {
          if (std::any_of(records.begin(), records.end(),
                          [&](const ChangeRecord& k) { return adapters::state::sameRecord(k, r); }))
            return true;
        }
      }
      return false;
    }();
    if (left) {
      out.push_back(Outcome{OutcomeResult::Kept, ChangeKind::Domain, "", file, "",
                            file + " kept: a change it records is still in effect (see above)"});
    } else if (auto moved = markReverted(file)) {
      out.push_back(Outcome{OutcomeResult::Done, ChangeKind::Domain, "", file, "",
                            file + ": every change it records that could be read is given back; kept as " + *moved});
    } else {
      out.push_back(Outcome{OutcomeResult::Failed, ChangeKind::Domain, "", file, "",
                            "cannot rename " + file + ": " + moved.error().describe()});
    }
    return out;
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
    auto& lost = store_.lost();
    for (size_t i = lost.size(); i-- > 0;) {  // newest first
      const ChangeRecord& r = lost[i];
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
    lost = std::move(stillLost);
    store_.settlePending();
    for (auto* list : {&store_.list(List::Persistent), &store_.list(List::Runtime)}) {
      // Newest first, each record dropped and saved as soon as its value is back: a process
      // stopped in between leaves a record whose value reads as before, which the next revert
      // drops with nothing to do.
      for (size_t i = list->size(); i-- > 0;) {
        const ChangeRecord r = (*list)[i];
        if (!concerns(r) || !revertOne(r)) continue;
        list->erase(list->begin() + static_cast<std::ptrdiff_t>(i));
        store_.save();
      }
    }
    store_.save(RecordStore::Copy::Now);
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
    if (!store_.intend(List::Runtime, std::move(r), type != nullptr ? std::string(core::toString(*type)) : c.from))
      return out(OutcomeResult::Failed, c, kNotRecorded);
    auto report =
        runDomainChange(*prepared, ctx_.root, ctx_.writer, *journal, host_.kernel.upstream.version, ctx_.hooks);
    store_.settleLast(List::Runtime);
    if (report.gone) return out(OutcomeResult::Skipped, c, report.summary());
    if (!report.succeeded) return out(OutcomeResult::Failed, c, report.summary());
    return out(OutcomeResult::Done, c,
               report.summary() + " in " + millis(report.totalTime) + " (" + millis(report.kernelTime) +
                   " of it in the kernel's unbind, bind and type writes); " + c.tradeOff);
  }

  bool param(const core::Change& c) {
    const std::string path = moduleParamPath(c.object);
    // The value before is read just before the write, not taken from the plan, which may be
    // seconds old: revert restores what was there.
    ChangeRecord r = recordOf(c);
    if (auto was = ctx_.root.readFile(path)) r.original = std::string(core::trim(*was));
    std::string before = r.original;
    if (!store_.intend(List::Runtime, std::move(r), std::move(before)))
      return out(OutcomeResult::Failed, c, kNotRecorded);
    auto w = ctx_.writer.write(path, c.to);
    store_.settleLast(List::Runtime);
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
    auto& persistent = store_.list(List::Persistent);
    auto it =
        std::find_if(persistent.begin(), persistent.end(), [&](const ChangeRecord& r) { return r.object == path; });
    ChangeRecord r = recordOf(*changes.front());
    if (it != persistent.end()) {
      r = *it;
      persistent.erase(it);
    } else {
      r.object = path;
      r.key = "(file)";
      r.existed = before.ok();
      r.original = before.valueOr(std::string());
    }
    r.written = text;
    if (!store_.intend(List::Persistent, std::move(r), before.valueOr(std::string()))) {
      for (const auto* c : changes) out(OutcomeResult::Failed, *c, kNotRecorded);
      return;
    }
    auto w = writeModprobeFile(ctx_.root.hostPath(path), text);
    step("write " + path);
    store_.settleLast(List::Persistent);
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
    if (!store_.intend(List::Runtime, r, r.original)) return out(OutcomeResult::Failed, c, kNotRecorded);
    auto set = timed([&] { return ctx_.ethtool->set(n->ifindex, c.kind, c.key, *value); });
    auto now =
        set ? timed([&] { return ctx_.ethtool->get(n->ifindex, c.kind, c.key); }) : core::Result<uint32_t>(set.error());
    if (!set || !now || *now != *value) {
      if (!set) {
        store_.settleLast(List::Runtime);
        return out(OutcomeResult::Failed, c, set.error().describe());
      }
      // The driver took the value and keeps another (e1000e's rx-usecs 7000 reads 7142: its ITR
      // has steps): put the one before back, or the NIC stays at a value nobody asked and no
      // record can restore.
      auto back = ctx_.ethtool->set(n->ifindex, c.kind, c.key, *was);
      store_.settleLast(List::Runtime);
      const std::string reads =
          now ? core::formatEthtoolValue(k->type, *now) : "nothing (" + now.error().describe() + ")";
      const std::string old = core::formatEthtoolValue(k->type, *was);
      return out(
          OutcomeResult::Failed, c,
          c.object + " " + c.key + ": set " + c.to + " but the driver reads back " + reads +
              (back ? "; put " + old + " back" : "; putting " + old + " back failed: " + back.error().describe()));
    }
    store_.settleLast(List::Runtime);
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
    if (auto why = untrusted(r)) return done(r, OutcomeResult::Refused, *why, false);
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

  // A record names a place iommud never writes (a records file edited or planted): revert writes
  // only modprobe.d files of its own name and module parameters, never a path a record chooses.
  [[nodiscard]] std::optional<std::string> untrusted(const ChangeRecord& r) const {
    auto plainName = [](std::string_view n) {
      return !n.empty() && n != "." && n != ".." && std::all_of(n.begin(), n.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '-' || ch == '.';
      });
    };
    const std::string prefix = ctx_.paths.modprobeDir + "/iommud-";
    if (r.kind == ChangeKind::ModprobeConf && !(r.object.starts_with(prefix) && r.object.ends_with(".conf") &&
                                                plainName(std::string_view(r.object).substr(prefix.size())))) {
      return r.object + " is not a file iommud writes (" + prefix +
             "MODULE.conf): the record is not trusted; left alone";
    }
    if (r.kind == ChangeKind::ModuleParam &&
        (!plainName(r.object) || r.object.find('.') == std::string::npos || r.object.find("..") != std::string::npos)) {
      return r.object + " is not a module parameter (MODULE.PARAMETER): the record is not trusted; left alone";
    }
    return std::nullopt;
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

  const core::HostFacts& host_;
  ApplyContext& ctx_;
  std::optional<core::NetOwnerSources> owners_;  // read once, when a NIC value is first touched
  std::vector<Outcome> outcomes_;                // before store_, whose hooks add to it
  RecordStore store_;
};

}  // namespace

std::vector<Outcome> applyPlan(const core::Plan& plan, const core::HostFacts& host, ApplyContext& ctx) {
  return Session(host, ctx).apply(plan);
}

std::vector<Outcome> revertChanges(const std::optional<std::string>& device, const core::HostFacts& host,
                                   ApplyContext& ctx, const std::string& keptFile) {
  if (!keptFile.empty()) return Session(host, ctx).revertKept(keptFile, device);
  return Session(host, ctx).revert(device);
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
