#include "app/report/verify_report.hpp"

#include <algorithm>
#include <array>

#include "app/report/json_writer.hpp"

namespace iommud::app {

namespace {

using core::ChangeKind;
using State = Verified::State;

// Worst first: what the reader has to act on leads.
constexpr std::array<State, 4> kOrder = {State::Drifted, State::Gone, State::Unchecked, State::AsRecorded};

// "0000:03:00.0 group 14 type", "nvme.poll_queues", "0000:05:00.0 enp5s0 rings rx".
std::string what(const ChangeRecord& r) {
  switch (r.kind) {
    case ChangeKind::Domain: return r.device + " group " + (r.group ? std::to_string(*r.group) : "?") + " type";
    case ChangeKind::ModuleParam:
    case ChangeKind::ModprobeConf: return r.object;
    default: return r.device + " " + r.object + " " + std::string(core::toString(r.kind)) + " " + r.key;
  }
}

// "set to identity at 2026-11-21T12:00:00Z (rule nvme-identity)".
std::string whatWasSet(const ChangeRecord& r) {
  std::string out = r.kind == ChangeKind::ModprobeConf ? "written" : "set to " + r.written;
  if (!r.time.empty()) out += " at " + r.time;
  if (!r.rule.empty()) out += " (rule " + r.rule + ")";
  return out;
}

std::string label(State s, const Style& style) {
  switch (s) {
    case State::Drifted: return style.red("drifted    ");
    case State::Gone: return style.yellow("gone       ");
    case State::Unchecked: return style.yellow("not checked");
    case State::AsRecorded: return style.green("as recorded");
  }
  return "";
}

std::string nowOf(const Verified& v) {
  switch (v.state) {
    case State::Drifted:
      return v.record.kind == ChangeKind::ModprobeConf ? "; edited since" : "; the host has " + v.now;
    case State::Gone: return "; " + v.why;
    case State::Unchecked: return "; not checked: " + v.why;
    case State::AsRecorded: return "";
  }
  return "";
}

size_t count(const std::vector<Verified>& results, State s) {
  return static_cast<size_t>(
      std::count_if(results.begin(), results.end(), [s](const Verified& v) { return v.state == s; }));
}

}  // namespace

std::string verifyText(const std::vector<Verified>& results, const Style& style) {
  if (results.empty()) return "iommud has recorded no change on this host: nothing to verify.\n";
  std::string out;
  for (State s : kOrder) {
    for (const auto& v : results) {
      if (v.state != s) continue;
      out += label(s, style) + "  " + style.bold(what(v.record)) + "\n";
      out += std::string(13, ' ') + whatWasSet(v.record) + nowOf(v) + "\n";
    }
  }
  std::string sum;
  for (State s : kOrder) {
    if (size_t n = count(results, s); n > 0) {
      sum += (sum.empty() ? "" : ", ") + std::to_string(n) + " " +
             (s == State::Unchecked    ? "not checked"
              : s == State::AsRecorded ? "as recorded"
                                       : std::string(toString(s)));
    }
  }
  out += "\n" + std::to_string(results.size()) + (results.size() == 1 ? " change" : " changes") +
         " iommud recorded: " + sum + "\n";
  return fitLines(out, style.width);
}

std::string verifyJson(const std::vector<Verified>& results) {
  JsonWriter w;
  w.beginObject();
  w.field("schema_version", 1);
  w.key("summary").beginObject();
  for (State s : kOrder)
    w.field(s == State::AsRecorded ? "as_recorded" : toString(s), static_cast<uint64_t>(count(results, s)));
  w.endObject();
  w.key("records").beginArray();
  for (const auto& v : results) {
    const ChangeRecord& r = v.record;
    w.beginObject();
    w.field("state", toString(v.state));
    w.field("kind", core::toString(r.kind));
    w.field("device", r.device);
    w.field("group", r.group);
    w.field("object", r.object);
    w.field("key", r.key);
    w.field("set", r.written);
    w.key("now");
    v.state == State::AsRecorded || v.state == State::Drifted ? w.value(v.now) : w.null();
    w.field("set_at", r.time);
    w.field("rule", r.rule);
    w.field("rule_where", r.ruleWhere);
    w.key("why");
    v.why.empty() ? w.null() : w.value(v.why);
    w.endObject();
  }
  w.endArray();
  w.endObject();
  return w.take("\n");
}

}  // namespace iommud::app
