#include "app/change/domain_transaction.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "core/text.hpp"

namespace iommud::app {

namespace {

using adapters::sysfs::baseName;
using adapters::sysfs::Root;
using adapters::sysfs::SysfsWriter;
using Clock = std::chrono::steady_clock;

std::string devicePath(std::string_view address) {
  return "/sys/bus/pci/devices/" + std::string(address);
}

bool deviceExists(const Root& root, std::string_view address) {
  return root.readLink(devicePath(address)).ok();
}

std::optional<std::string> boundDriver(const Root& root, std::string_view address) {
  auto link = root.readLink(devicePath(address) + "/driver");
  if (!link) return std::nullopt;
  return std::string(baseName(*link));
}

std::optional<core::DomainType> readType(const Root& root, int group) {
  auto text = root.readFile(groupTypePath(group));
  if (!text) return std::nullopt;
  return core::parseDomainType(*text);
}

class Runner {
 public:
  Runner(const core::DomainChange& change, const Root& root, SysfsWriter& writer, adapters::state::Journal& journal,
         const std::optional<core::KernelVersion>& kernel, const TransactionHooks& hooks)
      : root_(root), writer_(writer), journal_(journal), kernel_(kernel), hooks_(hooks) {
    report_.change = change;
  }

  TransactionReport run() {
    auto start = Clock::now();
    const auto& c = report_.change;
    if (c.noop()) {
      report_.succeeded = true;
      report_.finalType = c.to;
    } else if (auto begun = journal_.begin(c); !begun) {
      fail("write the journal", begun.error().describe());
    } else if (forward()) {
      report_.succeeded = true;
      report_.finalType = c.to;
      endJournal("done");
    } else if (std::none_of(c.members.begin(), c.members.end(),
                            [&](const core::MemberStep& m) { return deviceExists(root_, m.address); })) {
      report_.gone = true;  // hot-unplugged mid-way: nothing is left to roll back
      endJournal("gone");
    } else {
      rollBack();
    }
    report_.totalTime = Clock::now() - start;
    return std::move(report_);
  }

 private:
  // Unbind, write, rebind, read back; false at the first failure (recorded).
  bool forward() {
    const auto& c = report_.change;
    for (const auto& m : c.members) {
      if (!m.unbind) continue;
      if (!step("unbind " + m.address, driverPath(*m.driver, "unbind"), m.address,
                "unbind " + m.address + " from " + *m.driver)) {
        return false;
      }
      if (!isVanished(m.address)) unbound_.push_back(&m);
    }
    const std::string type(core::toString(c.to));
    if (!journaled("write " + type)) return false;
    if (auto w = write(groupTypePath(c.group), type); !w) {
      fail("write type " + type + " to group " + std::to_string(c.group),
           core::explainTypeWriteError(w.error().code, kernel_, c.members.size()) + " (" + w.error().message + ")");
      return false;
    }
    typeWritten_ = true;
    after("write " + type);
    for (const auto* m : unbound_) {
      if (!step("bind " + m->address, driverPath(*m->driver, "bind"), m->address,
                "bind " + m->address + " to " + *m->driver)) {
        return false;
      }
      if (!isVanished(m->address)) rebound_.push_back(m);
    }
    // Read back: the kernel may accept a write and keep another type (a device that requires one).
    auto now = readType(root_, c.group);
    if (now != c.to) {
      fail("read back group " + std::to_string(c.group),
           "the group reads " + (now ? std::string(core::toString(*now)) : std::string("nothing")) + ", not " + type);
      return false;
    }
    auto wrong = std::find_if(unbound_.begin(), unbound_.end(), [&](const core::MemberStep* m) {
      return !isVanished(m->address) && boundDriver(root_, m->address) != m->driver;
    });
    if (wrong != unbound_.end()) {
      const auto& m = **wrong;
      fail("read back " + m.address, "it is bound to " + boundDriver(root_, m.address).value_or("no driver") +
                                         ", not " + *m.driver + " (the probe failed? see dmesg)");
      return false;
    }
    return true;
  }

  // Restores the old type and rebinds every device the transaction unbound.
  void rollBack() {
    const auto& c = report_.change;
    report_.rolledBack = true;
    if (typeWritten_) {
      // The old type can be written only with the group's drivers unbound again.
      for (const auto* m : rebound_) {
        if (!isVanished(m->address)) quietly("unbind " + m->address, driverPath(*m->driver, "unbind"), m->address);
      }
      const std::string old(core::toString(c.from));
      (void)journal_.step("write " + old);  // best effort: the header already names both types
      if (!write(groupTypePath(c.group), old)) report_.error += "; restoring " + old + " failed too";
    }
    for (const auto& m : c.members) {
      if (!m.unbind || !deviceExists(root_, m.address)) continue;
      if (!boundDriver(root_, m.address)) quietly("bind " + m.address, driverPath(*m.driver, "bind"), m.address);
    }
    for (const auto& m : c.members) {
      if (m.unbind && deviceExists(root_, m.address) && !boundDriver(root_, m.address)) {
        report_.leftUnbound.push_back(m.address);
      }
    }
    report_.finalType = readType(root_, c.group);
    // A device left unbound keeps the journal, so that the next start tries again.
    if (report_.leftUnbound.empty()) endJournal("rolled back");
  }

  // Journals `name`, writes `address` to `path`; a device that vanished meanwhile is not a failure.
  bool step(const std::string& name, const std::string& path, const std::string& address, const std::string& what) {
    if (!journaled(name)) return false;
    auto w = write(path, address);
    if (!w) {
      if (!deviceExists(root_, address)) {
        report_.vanished.push_back(address);
        return true;
      }
      fail(what, w.error().message);
      return false;
    }
    after(name);
    return true;
  }

  // A rollback step: made even when it cannot be journaled (a disk gone read-only, full). The
  // journal's header already names every member and its driver, which is all a recovery needs, so
  // binding needs no record; a device left unbound because its step was not journaled would stay
  // so until the next start.
  void quietly(const std::string& name, const std::string& path, const std::string& address) {
    (void)journal_.step(name);
    // Rollback's best effort: the read-back after it names what stayed unbound (leftUnbound), and a
    // failed unbind shows in the type write that follows.
    (void)write(path, address);
  }

  bool journaled(const std::string& name) {
    auto j = journal_.step(name);
    if (!j) fail("journal '" + name + "'", j.error().describe());
    return j.ok();
  }

  core::Result<core::Done> write(const std::string& path, std::string_view value) {
    auto start = Clock::now();
    auto r = writer_.write(path, value);
    report_.kernelTime += Clock::now() - start;
    return r;
  }

  void after(const std::string& name) {
    if (hooks_.afterStep) hooks_.afterStep(name);
  }

  bool isVanished(const std::string& address) const {
    return std::find(report_.vanished.begin(), report_.vanished.end(), address) != report_.vanished.end();
  }

  void fail(std::string step, std::string error) {
    report_.failedStep = std::move(step);
    report_.error = std::move(error);
  }

  void endJournal(std::string_view outcome) {
    if (auto e = journal_.end(outcome); !e && report_.error.empty()) report_.error = e.error().describe();
  }

  const Root& root_;
  SysfsWriter& writer_;
  adapters::state::Journal& journal_;
  const std::optional<core::KernelVersion>& kernel_;
  const TransactionHooks& hooks_;
  TransactionReport report_;
  std::vector<const core::MemberStep*> unbound_, rebound_;
  bool typeWritten_ = false;
};

}  // namespace

std::string groupTypePath(int group) {
  return "/sys/kernel/iommu_groups/" + std::to_string(group) + "/type";
}

std::string driverPath(std::string_view driver, std::string_view action) {
  return "/sys/bus/pci/drivers/" + std::string(driver) + "/" + std::string(action);
}

TransactionHooks stopAfter(std::string_view spec, std::function<void()> stop) {
  int nth = 1;
  if (auto hash = spec.rfind('#'); hash != std::string_view::npos) {
    const auto count = spec.substr(hash + 1);
    int n = 0;
    auto [end, err] = std::from_chars(count.data(), count.data() + count.size(), n);
    if (err == std::errc{} && end == count.data() + count.size() && n > 0) {
      nth = n;
      spec = spec.substr(0, hash);
    }
  }
  return {[prefix = std::string(spec), nth, stop = std::move(stop), seen = 0](std::string_view step) mutable {
    if (step.starts_with(prefix) && ++seen == nth) stop();
  }};
}

std::string TransactionReport::summary() const {
  std::string devices;
  for (const auto& m : change.members) devices += (devices.empty() ? "" : ", ") + m.address;
  std::string out = "group " + std::to_string(change.group) + " (" + devices +
                    "): " + std::string(core::toString(change.from)) + " -> " + std::string(core::toString(change.to));
  if (succeeded) return out + (change.live ? ", done live (irreversible until unbind or reboot)" : ", done");
  if (gone) return out + ": every device of the group went away during the change (hot-unplug); nothing to undo";
  out += ": " + failedStep + " failed: " + error;
  if (rolledBack) {
    out += "; rolled back, the group is " +
           (finalType ? std::string(core::toString(*finalType)) : std::string("of unknown type"));
  }
  if (!leftUnbound.empty()) {
    out += "; left unbound:";
    for (const auto& a : leftUnbound) out += " " + a;
    out += " (retried at the next start)";
  }
  return out;
}

TransactionReport runDomainChange(const core::DomainChange& change, const Root& root, SysfsWriter& writer,
                                  adapters::state::Journal& journal, const std::optional<core::KernelVersion>& kernel,
                                  const TransactionHooks& hooks) {
  return Runner(change, root, writer, journal, kernel, hooks).run();
}

core::Result<std::optional<RecoveryReport>> recoverDomainChange(const Root& root, SysfsWriter& writer,
                                                                adapters::state::Journal& journal) {
  auto read = journal.read();
  if (!read) return read.error();
  if (!*read) return std::optional<RecoveryReport>{};
  RecoveryReport r;
  r.record = std::move(**read);
  if (r.record.end) {  // ended, only not removed
    // Nothing is left to recover: a journal that cannot be removed reads as ended next time too.
    (void)journal.discard();
    return std::optional<RecoveryReport>{};
  }
  for (const auto& m : r.record.change.members) {
    if (!m.unbind || !m.driver) continue;
    if (!deviceExists(root, m.address)) {
      r.vanished.push_back(m.address);
      continue;
    }
    if (boundDriver(root, m.address)) continue;
    auto bound = writer.write(driverPath(*m.driver, "bind"), m.address);
    if (bound && boundDriver(root, m.address)) {
      r.rebound.push_back(m.address);
      continue;
    }
    r.failed.push_back(m.address);
    r.errors.push_back("could not rebind " + m.address + " to " + *m.driver + ": " +
                       (bound ? std::string("the probe failed (see dmesg)") : bound.error().message) + " (`echo " +
                       m.address + " > " + driverPath(*m.driver, "bind") + "` when it is fixed)");
  }
  r.type = readType(root, r.record.change.group);
  r.outcome = r.type == r.record.change.to ? "finished"
              : r.type == r.record.change.from
                  ? "rolled back"
                  : "the group is " + (r.type ? std::string(core::toString(*r.type)) : std::string("of unknown type"));
  // A journal with lines not understood is kept for the administrator (recoverDomainChanges moves
  // it aside), once every member it names is bound.
  if (r.failed.empty() && r.record.damage.empty()) {
    if (auto d = journal.discard(); !d) return d.error();
  }
  return std::optional<RecoveryReport>{std::move(r)};
}

std::string Recovery::degraded() const {
  if (leftUnbound.empty()) return "";
  std::string out =
      std::to_string(leftUnbound.size()) + (leftUnbound.size() == 1 ? " device" : " devices") + " left unbound:";
  for (const auto& a : leftUnbound) out += " " + a;
  return out;
}

Recovery recoverDomainChanges(const Root& root, SysfsWriter& writer, const adapters::state::Journal& journal,
                              long now) {
  Recovery out;
  for (const auto& path : journal.leftovers()) {
    adapters::state::Journal one(path);
    auto r = recoverDomainChange(root, writer, one);
    if (!r) {
      auto moved = one.moveAside(now);
      out.problems.push_back("the transaction journal " + path + " cannot be read (" + r.error().message + "): " +
                             (moved ? "moved to " + *moved + ", kept for the administrator"
                                    : "and cannot be moved aside: " + moved.error().describe()));
      continue;
    }
    if (!*r) continue;
    const std::string group = "group " + std::to_string((*r)->record.change.group) + ": ";
    for (const auto& e : (*r)->errors) out.problems.push_back(group + e);
    if (!(*r)->record.damage.empty() && (*r)->failed.empty()) {
      std::string lines;
      for (const auto& d : (*r)->record.damage) lines += (lines.empty() ? "" : "; ") + d;
      auto moved = one.moveAside(now);
      out.problems.push_back(group + "the transaction journal " + path + " has lines iommud cannot read (" + lines +
                             "); every device its header names was rebound where it was unbound; " +
                             (moved ? "kept as " + *moved + " for the administrator"
                                    : "it cannot be moved aside: " + moved.error().describe()));
    }
    out.leftUnbound.insert(out.leftUnbound.end(), (*r)->failed.begin(), (*r)->failed.end());
    out.recovered.push_back(std::move(**r));
  }
  return out;
}

// Read as status reads: listed and opened inside the root, so that under --root a link in the
// tree (its run directory, a journal) never leads to a file outside it.
std::vector<core::UnboundDevice> unboundDevices(const Root& root, const std::string& runDir) {
  std::vector<core::UnboundDevice> out;
  auto entries = root.listDir(runDir.empty() ? "/" : runDir);
  if (!entries) return out;
  for (const auto& name : adapters::state::Journal::leftoverNames(*entries, "transaction.journal")) {
    const std::string file = runDir + "/" + name;
    auto text = root.readFile(file, adapters::state::kMaxJournalBytes);
    if (!text) continue;
    auto read = adapters::state::parseJournal(*text);
    if (!read || read->end) continue;
    for (const auto& m : read->change.members) {
      if (m.unbind && m.driver && deviceExists(root, m.address) && !boundDriver(root, m.address)) {
        out.push_back({m.address, *m.driver, read->change.group, root.hostPath(file)});
      }
    }
  }
  return out;
}

}  // namespace iommud::app
