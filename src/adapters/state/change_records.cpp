#include "adapters/state/change_records.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "adapters/state/atomic_file.hpp"
#include "adapters/state/lock.hpp"

namespace iommud::adapters::state {

namespace {

using core::ChangeKind;
using Json = nlohmann::json;

Json toJson(const ChangeRecord& r) {
  Json j = {{"kind", std::string(core::toString(r.kind))},
            {"device", r.device},
            {"object", r.object},
            {"key", r.key},
            {"original", r.original},
            {"written", r.written},
            {"existed", r.existed},
            {"rule", r.rule},
            {"rule_where", r.ruleWhere},
            {"time", r.time},
            {"irreversible", r.irreversible},
            {"ifindex", r.ifindex}};
  j["group"] = r.group ? Json(*r.group) : Json(nullptr);
  if (r.pending) {  // only while a change is under way: settled records read as they always did
    j["pending"] = true;
    j["before"] = r.before;
  }
  return j;
}

// One entry's fields read with their types checked: the first thing wrong is kept, in words.
class EntryReader {
 public:
  explicit EntryReader(const Json& j) : j_(j) {}

  void text(const char* key, std::string& out, bool required = true) {
    if (const Json* v = field(key, required, Json::value_t::string)) out = v->get<std::string>();
  }
  void flag(const char* key, bool& out) {
    if (const Json* v = field(key, false, Json::value_t::boolean)) out = v->get<bool>();
  }
  void count(const char* key, int& out) {
    if (const Json* v = number(key, false)) out = v->get<int>();
  }
  void group(std::optional<int>& out) {
    auto it = j_.find("group");
    if (it == j_.end() || it->is_null()) return;
    if (const Json* v = number("group", false)) out = v->get<int>();
  }
  // A key this version does not write: a newer version's, or damage. Either way the entry is not
  // understood whole, and rewriting it without the key would lose what it says.
  void noOtherKeys() {
    static constexpr std::array<std::string_view, 15> kKnown = {
        "kind", "device",     "group", "object",       "key",     "original", "written", "existed",
        "rule", "rule_where", "time",  "irreversible", "ifindex", "pending",  "before"};
    for (const auto& [key, value] : j_.items()) {
      if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end())
        fail("\"" + key + "\" is not a key this version knows");
    }
  }
  void fail(std::string why) {
    if (problem.empty()) problem = std::move(why);
  }
  std::string problem;

 private:
  const Json* field(const char* key, bool required, Json::value_t type) {
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail("\"" + std::string(key) + "\" is missing");
      return nullptr;
    }
    if (it->type() != type) {
      fail("\"" + std::string(key) + "\" is " + article(it->type_name()) + ", not " + article(Json(type).type_name()));
      return nullptr;
    }
    return &*it;
  }
  // A whole number that fits an int, not negative (group numbers and interface indexes).
  const Json* number(const char* key, bool required) {
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail("\"" + std::string(key) + "\" is missing");
      return nullptr;
    }
    if (!it->is_number_integer() ||
        (it->is_number_unsigned() ? it->get<uint64_t>() > 0x7fffffffU
                                  : it->get<int64_t>() < 0 || it->get<int64_t>() > 0x7fffffff)) {
      fail("\"" + std::string(key) + "\" is " + (it->is_number() ? it->dump() : article(it->type_name())) +
           ", not a whole number from 0 up");
      return nullptr;
    }
    return &*it;
  }
  static std::string article(std::string_view type) {
    return (type == "object" || type == "array" ? "an " : type == "null" ? "" : "a ") + std::string(type);
  }
  const Json& j_;
};

// The record an entry holds, or why it is not one this version understands.
core::Result<ChangeRecord> fromJson(const Json& j) {
  if (!j.is_object()) return core::Error{EINVAL, "", std::string("a JSON ") + j.type_name() + ", not a record"};
  EntryReader in(j);
  std::string kind;
  in.text("kind", kind);
  ChangeRecord r;
  if (in.problem.empty()) {
    auto k = core::parseChangeKind(kind);
    if (!k) return core::Error{EINVAL, "", "a change of kind \"" + kind + "\", which this version does not know"};
    r.kind = *k;
  }
  in.text("device", r.device);
  in.group(r.group);
  in.text("object", r.object);
  in.text("key", r.key);
  in.text("original", r.original);
  in.text("written", r.written);
  in.flag("existed", r.existed);
  in.text("rule", r.rule, false);
  in.text("rule_where", r.ruleWhere, false);
  in.text("time", r.time, false);
  in.flag("irreversible", r.irreversible);
  in.count("ifindex", r.ifindex);
  in.flag("pending", r.pending);
  in.text("before", r.before, false);
  in.noOtherKeys();
  if (in.problem.empty() && r.kind == ChangeKind::Domain && !r.group) in.fail("a domain change names no group");
  if (!in.problem.empty()) return core::Error{EINVAL, "", in.problem};
  return r;
}

void readEntry(const Json& j, size_t n, RecordsFile& out) {
  auto r = fromJson(j);
  if (r) {
    out.records.push_back(std::move(r).value());
  } else {
    out.damage.push_back("entry " + std::to_string(n) + ": " + r.error().message);
  }
}

bool space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

size_t skipSpace(std::string_view t, size_t at) {
  while (at < t.size() && space(t[at])) ++at;
  return at;
}

// Where the JSON value that starts at `at` ends: after its closing bracket, or at the ',' or ']'
// that follows a scalar at the array's level; the text's end when it is cut short inside it.
// Strings and their escapes are skipped, so a bracket inside one counts for nothing.
size_t valueEnd(std::string_view t, size_t at) {
  int depth = 0;
  bool inString = false;
  for (size_t i = at; i < t.size(); ++i) {
    const char c = t[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;
      if (--depth == 0) return i + 1;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return t.size();
}

// A file that is not valid JSON (cut short, a byte lost): each entry that is whole is read on its
// own, the rest is reported. Linear: each byte is looked at once by the scan and once by a parse.
RecordsFile salvage(std::string_view t) {
  RecordsFile out;
  size_t at = skipSpace(t, 0);
  if (at == t.size() || t[at] != '[') {
    out.damage.emplace_back(at == t.size() ? "it is empty" : "it is not a JSON array of records");
    return out;
  }
  for (size_t n = 1;; ++n) {
    at = skipSpace(t, at + 1);
    if (at == t.size()) {
      out.damage.emplace_back("it ends before its last ] (cut short)");
      return out;
    }
    if (t[at] == ']' && n == 1) break;
    const size_t end = valueEnd(t, at);
    Json j = Json::parse(t.substr(at, end - at), nullptr, false);
    if (j.is_discarded()) {
      out.damage.push_back("entry " + std::to_string(n) + " is not JSON" +
                           (end == t.size() ? ": the file ends inside it (cut short)" : ""));
    } else {
      readEntry(j, n, out);
    }
    at = skipSpace(t, end);
    if (at == t.size()) {
      if (!j.is_discarded()) out.damage.emplace_back("it ends before its last ] (cut short)");
      return out;
    }
    if (t[at] == ']') break;
    if (t[at] != ',') {
      out.damage.push_back("after entry " + std::to_string(n) + " comes neither , nor ]");
      return out;
    }
  }
  if (skipSpace(t, at + 1) != t.size()) out.damage.emplace_back("text follows its last ]");
  return out;
}

}  // namespace

bool sameRecord(const ChangeRecord& a, const ChangeRecord& b) {
  return a.kind == b.kind && a.device == b.device && a.object == b.object && a.key == b.key && a.written == b.written &&
         a.time == b.time;
}

RecordsFile parseRecordsFile(std::string_view text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) return salvage(text);
  RecordsFile out;
  if (!j.is_array()) {
    out.damage.push_back(std::string("it holds a JSON ") + j.type_name() + ", not an array of records");
    return out;
  }
  for (size_t i = 0; i < j.size(); ++i) readEntry(j[i], i + 1, out);
  return out;
}

core::Result<std::optional<RecordsFile>> readRecordsFile(const std::string& path) {
  auto text = readOwnFile(path, kMaxRecordsBytes);
  if (!text) return text.error();
  if (!*text) return std::optional<RecordsFile>{};
  return std::optional<RecordsFile>{parseRecordsFile(**text)};
}

core::Result<std::string> recordsText(const std::vector<ChangeRecord>& records) {
  Json j = Json::array();
  for (const auto& r : records) j.push_back(toJson(r));
  try {
    return j.dump(2) + "\n";
  } catch (const Json::type_error&) {  // 316: a string that is not UTF-8; which record's, said
    std::string which = "a record";
    for (const auto& r : j) {
      try {
        static_cast<void>(r.dump());
      } catch (const Json::type_error&) {
        which = "the record of " + r.value("object", std::string());
        break;
      }
    }
    return core::Error{EILSEQ, "",
                       which +
                           " holds text that is not UTF-8 (a file in another encoding), which a records file "
                           "cannot hold unchanged"};
  }
}

core::Result<core::Done> saveRecords(const sysfs::Root& root, const std::string& path,
                                     const std::vector<ChangeRecord>& records, Durability durability) {
  const std::string file = root.hostPath(path);
  if (auto made = makeDirectories(file.substr(0, file.rfind('/'))); !made) return made;
  auto text = recordsText(records);
  if (!text) return core::Error{text.error().code, file, text.error().message};
  return writeFileAtomic(file, *text, 0600, ::write, durability);
}

}  // namespace iommud::adapters::state
