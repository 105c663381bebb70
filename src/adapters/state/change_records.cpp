#include "adapters/state/change_records.hpp"

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

std::optional<ChangeKind> kindNamed(std::string_view name) {
  for (auto k : {ChangeKind::ModuleParam, ChangeKind::Domain, ChangeKind::Rings, ChangeKind::Channels,
                 ChangeKind::Coalesce, ChangeKind::ModprobeConf}) {
    if (core::toString(k) == name) return k;
  }
  return std::nullopt;
}

std::optional<ChangeRecord> fromJson(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  auto kind = kindNamed(j.value("kind", ""));
  if (!kind) return std::nullopt;
  ChangeRecord r;
  r.kind = *kind;
  r.device = j.value("device", "");
  if (j.contains("group") && j["group"].is_number_integer()) r.group = j["group"].get<int>();
  r.object = j.value("object", "");
  r.key = j.value("key", "");
  r.original = j.value("original", "");
  r.written = j.value("written", "");
  r.existed = j.value("existed", true);
  r.rule = j.value("rule", "");
  r.ruleWhere = j.value("rule_where", "");
  r.time = j.value("time", "");
  r.irreversible = j.value("irreversible", false);
  r.ifindex = j.value("ifindex", 0);
  r.pending = j.value("pending", false);
  r.before = j.value("before", "");
  return r;
}

}  // namespace

std::vector<ChangeRecord> parseRecords(std::string_view text) {
  std::vector<ChangeRecord> out;
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_array()) return out;  // a damaged file loses its records, not the run
  for (const auto& e : j) {
    if (auto r = fromJson(e)) out.push_back(std::move(*r));
  }
  return out;
}

std::vector<ChangeRecord> loadRecords(const sysfs::Root& root, const std::string& path) {
  auto text = root.readFile(path);
  return text ? parseRecords(*text) : std::vector<ChangeRecord>{};
}

std::string recordsText(const std::vector<ChangeRecord>& records) {
  Json j = Json::array();
  for (const auto& r : records) j.push_back(toJson(r));
  return j.dump(2) + "\n";
}

core::Result<core::Done> saveRecords(const sysfs::Root& root, const std::string& path,
                                     const std::vector<ChangeRecord>& records, Durability durability) {
  const std::string file = root.hostPath(path);
  if (auto made = makeDirectories(file.substr(0, file.rfind('/'))); !made) return made;
  return writeFileAtomic(file, recordsText(records), 0600, ::write, durability);
}

}  // namespace iommud::adapters::state
