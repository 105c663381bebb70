#include "app/worker/worker_report.hpp"

#include <cerrno>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace iommud::app {

namespace {

using Json = nlohmann::json;
namespace bus = adapters::dbus;

// One letter per news, so that a batch of a thousand devices stays small on the wire.
constexpr std::string_view kNewsLetters = "RTAXFPBU";

// A list the report must have: nlohmann iterates an object or a scalar as well, silently.
const Json& list(const Json& j, const char* key) {
  const Json& v = j.at(key);
  if (!v.is_array()) throw std::invalid_argument(std::string(key) + " is no list");
  return v;
}

Json actionJson(const bus::Action& a) {
  return Json::array({a.time, a.result, a.device, a.message});
}

bus::Action actionOf(const Json& j) {
  return {j.at(0).get<std::string>(), j.at(1).get<std::string>(), j.at(2).get<std::string>(),
          j.at(3).get<std::string>()};
}

Json hostJson(const bus::HostSummary& h) {
  Json groups = Json::array(), devices = Json::array(), findings = Json::array(), changes = Json::array();
  for (const auto& g : h.groups) groups.push_back(Json::array({g.id, g.type, g.devices}));
  for (const auto& d : h.devices) devices.push_back(Json::array({d.address, d.name, d.driver, d.group, d.untrusted}));
  for (const auto& f : h.findings) findings.push_back(Json::array({f.id, f.severity, f.title}));
  for (const auto& c : h.changes)
    changes.push_back(Json::array({c.time, c.device, c.object, c.key, c.from, c.to, c.rule}));
  return Json{{"vendor", h.vendor}, {"mode", h.mode},       {"groups", groups},
              {"devices", devices}, {"findings", findings}, {"changes", changes}};
}

bus::HostSummary hostOf(const Json& j) {
  bus::HostSummary h;
  h.vendor = j.at("vendor").get<std::string>();
  h.mode = j.at("mode").get<std::string>();
  for (const auto& g : list(j, "groups")) {
    h.groups.push_back({g.at(0).get<int32_t>(), g.at(1).get<std::string>(), g.at(2).get<std::vector<std::string>>()});
  }
  for (const auto& d : list(j, "devices")) {
    h.devices.push_back({d.at(0).get<std::string>(), d.at(1).get<std::string>(), d.at(2).get<std::string>(),
                         d.at(3).get<int32_t>(), d.at(4).get<bool>()});
  }
  for (const auto& f : list(j, "findings")) {
    h.findings.push_back({f.at(0).get<std::string>(), f.at(1).get<std::string>(), f.at(2).get<std::string>()});
  }
  for (const auto& c : list(j, "changes")) {
    h.changes.push_back({c.at(0).get<std::string>(), c.at(1).get<std::string>(), c.at(2).get<std::string>(),
                         c.at(3).get<std::string>(), c.at(4).get<std::string>(), c.at(5).get<std::string>(),
                         c.at(6).get<std::string>()});
  }
  return h;
}

Json countersJson(const Counters& c) {
  return Json::array({c.done, c.advised, c.refused, c.failed, c.reverted, c.revertFailed, c.drift});
}

Counters countersOf(const Json& j) {
  Counters c;
  for (auto [i, field] :
       {std::pair(0, &c.done), std::pair(1, &c.advised), std::pair(2, &c.refused), std::pair(3, &c.failed),
        std::pair(4, &c.reverted), std::pair(5, &c.revertFailed), std::pair(6, &c.drift)}) {
    const Json& v = j.at(static_cast<size_t>(i));
    if (!v.is_number_unsigned()) throw std::invalid_argument("a counter is no unsigned number");
    *field = v.get<uint64_t>();
  }
  return c;
}

// Whether maps went through translation: true, false or null (unknown).
Json translatedJson(const std::optional<bool>& t) {
  return t ? Json(*t) : Json(nullptr);
}

std::optional<bool> translatedOf(const Json& j) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_boolean()) throw std::invalid_argument("translated is neither true, false nor null");
  return j.get<bool>();
}

WorkerReport reportOf(const Json& j) {
  WorkerReport r;
  for (const auto& d : list(j, "devices")) {
    auto letter = d.at(0).get<std::string>();
    auto at = letter.size() == 1 ? kNewsLetters.find(letter[0]) : std::string_view::npos;
    if (at == std::string_view::npos) throw std::out_of_range("unknown device news \"" + letter + "\"");
    r.devices.push_back({static_cast<DeviceNews>(at), d.at(1).get<std::string>(), d.at(2).get<std::string>()});
  }
  for (const auto& a : list(j, "actions")) r.actions.push_back(actionOf(a));
  r.counters = countersOf(list(j, "counters"));
  for (const auto& e : list(j, "exports"))
    r.exports.push_back({e.at(0).get<std::string>(), e.at(1).get<std::string>()});
  if (j.contains("error"))
    r.error = CallError{j["error"].at(0).get<std::string>(), j["error"].at(1).get<std::string>()};
  if (j.contains("plan")) r.planJson = j["plan"].get<std::string>();
  if (j.contains("host")) r.host = hostOf(j["host"]);
  if (j.contains("changed")) {
    for (const auto& c : list(j, "changed"))
      r.changed.push_back(
          {c.at(0).get<std::string>(), c.at(1).get<std::string>(), translatedOf(c.at(2)), translatedOf(c.at(3))});
  }
  if (j.contains("cut")) r.complete = !j["cut"].get<bool>();
  return r;
}

std::vector<std::string> stringsOf(const Json& j, const char* key) {
  std::vector<std::string> out;
  for (const auto& s : list(j, key)) out.push_back(s.get<std::string>());
  return out;
}

WorkerRequest requestOf(const Json& j) {
  WorkerRequest r;
  const auto kind = j.at("kind").get<int>();
  if (kind < 0 || kind > static_cast<int>(WorkerRequest::Kind::Recover)) throw std::out_of_range("unknown kind");
  r.kind = static_cast<WorkerRequest::Kind>(kind);
  r.batch.hot = stringsOf(j, "hot");
  r.batch.cold = stringsOf(j, "cold");
  const Json& call = list(j, "call");
  const auto callKind = call.at(0).get<int>();
  if (callKind < 0 || callKind > static_cast<int>(WorkerCall::Kind::Revert)) throw std::out_of_range("unknown call");
  r.call = {static_cast<WorkerCall::Kind>(callKind), call.at(1).get<bool>(), call.at(2).get<std::string>()};
  r.wantsView = j.at("view").get<bool>();
  r.busView = j.at("bus").get<bool>();
  r.counters = countersOf(list(j, "counters"));
  for (const auto& d : list(j, "departed")) r.departed[d.at(0).get<std::string>()] = d.at(1).get<std::string>();
  return r;
}

}  // namespace

std::string encodeRequest(const WorkerRequest& r) {
  Json departed = Json::array();
  for (const auto& [identity, address] : r.departed) departed.push_back(Json::array({identity, address}));
  Json j{{"kind", static_cast<int>(r.kind)},
         {"hot", r.batch.hot},
         {"cold", r.batch.cold},
         {"call", Json::array({static_cast<int>(r.call.kind), r.call.hotplug, r.call.device})},
         {"view", r.wantsView},
         {"bus", r.busView},
         {"counters", countersJson(r.counters)},
         {"departed", departed}};
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

core::Result<WorkerRequest> decodeRequest(std::string_view bytes) {
  Json j = Json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return core::Error{EPROTO, "", "the daemon's request is no JSON object"};
  try {
    return requestOf(j);
  } catch (const std::exception& e) {
    return core::Error{EPROTO, "", std::string("the daemon's request is malformed: ") + e.what()};
  }
}

std::string encodeReport(const WorkerReport& report) {
  Json devices = Json::array(), actions = Json::array(), exports = Json::array();
  for (const auto& d : report.devices) {
    devices.push_back(Json::array({std::string(1, kNewsLetters[static_cast<size_t>(d.news)]), d.address, d.identity}));
  }
  for (const auto& a : report.actions) actions.push_back(actionJson(a));
  for (const auto& e : report.exports) exports.push_back(Json::array({e.path, e.error}));
  Json j{{"devices", devices}, {"actions", actions}, {"counters", countersJson(report.counters)}, {"exports", exports}};
  if (report.error) j["error"] = Json::array({report.error->name, report.error->message});
  if (report.planJson) j["plan"] = *report.planJson;
  if (report.host) j["host"] = hostJson(*report.host);
  if (!report.changed.empty()) {
    Json changed = Json::array();
    for (const auto& c : report.changed)
      changed.push_back(
          Json::array({c.device, c.name, translatedJson(c.translatedBefore), translatedJson(c.translatedAfter)}));
    j["changed"] = changed;
  }
  if (!report.complete) j["cut"] = true;
  // Invalid UTF-8 (a device name from sysfs) is replaced, not thrown at.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

core::Result<WorkerReport> decodeReport(std::string_view bytes) {
  Json j = Json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return core::Error{EPROTO, "", "the worker's report is no JSON object"};
  try {
    return reportOf(j);
  } catch (const std::exception& e) {  // a missing field, a wrong type, an unknown news letter
    return core::Error{EPROTO, "", std::string("the worker's report is malformed: ") + e.what()};
  }
}

std::vector<std::string> devicesOf(const Batch& batch) {
  auto all = batch.hot;
  all.insert(all.end(), batch.cold.begin(), batch.cold.end());
  return all;
}

std::string describe(const WorkerRequest& work) {
  switch (work.kind) {
    case WorkerRequest::Kind::View: return "the D-Bus view of the host";
    case WorkerRequest::Kind::Call: return "a D-Bus call";
    case WorkerRequest::Kind::Recover: return "the recovery";
    case WorkerRequest::Kind::Batch: break;
  }
  auto all = devicesOf(work.batch);
  if (all.empty()) return "the whole host";
  return all.size() == 1 ? all.front() : std::to_string(all.size()) + " devices";
}

std::string triggerName(const WorkerRequest& work) {
  if (work.kind == WorkerRequest::Kind::Call) {
    switch (work.call.kind) {
      case WorkerCall::Kind::Apply: return "apply";
      case WorkerCall::Kind::Revert: return "revert";
      case WorkerCall::Kind::Plan: return "plan";
    }
  }
  if (work.batch.whole()) return "coldplug";
  return work.batch.hot.empty() ? "change" : "hotplug";
}

}  // namespace iommud::app
