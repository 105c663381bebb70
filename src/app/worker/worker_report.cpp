#include "app/worker/worker_report.hpp"

#include <cerrno>
#include <nlohmann/json.hpp>
#include <stdexcept>

// The wire between the daemon and its worker: JSON objects whose fields are named as the C++
// fields are (one NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE list per type, so a field added to a type
// and not to its list fails the round-trip test), enums by the names of their one table. A
// missing field, a wrong type or an unknown name is an error, never a default.

// NOLINTBEGIN(readability-identifier-naming): nlohmann finds to_json and from_json by these names
namespace nlohmann {

// null, or the value.
template <class T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& v) { j = v ? json(*v) : json(nullptr); }
  static void from_json(const json& j, std::optional<T>& v) {
    if (j.is_null()) {
      v.reset();
    } else {
      v = j.get<T>();
    }
  }
};

}  // namespace nlohmann

namespace iommud::core {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EffectSubject, device, name, translatedBefore, translatedAfter)
}  // namespace iommud::core

namespace iommud::adapters::dbus {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Action, time, result, device, message)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GroupView, id, type, devices)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DeviceView, address, name, driver, group, untrusted)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FindingView, id, severity, title)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ChangeView, time, device, object, key, from, to, rule)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HostSummary, vendor, mode, groups, devices, findings, changes)
}  // namespace iommud::adapters::dbus

namespace iommud::app {

using Json = nlohmann::json;

namespace {

// An enum by its table's name; an unknown name throws.
template <class E, std::size_t N>
Json nameJson(const core::Names<E, N>& names, E value) {
  return std::string(core::nameOf(names, value));
}

template <class E, std::size_t N>
E valueJson(const core::Names<E, N>& names, const Json& j, const char* what) {
  auto name = j.get<std::string>();
  auto v = core::valueNamed(names, name);
  if (!v) throw std::out_of_range(std::string("unknown ") + what + " \"" + name + "\"");
  return *v;
}

}  // namespace

void to_json(Json& j, const DeviceEvent& e) {
  j = Json{{"news", nameJson(kDeviceNewsNames, e.news)}, {"address", e.address}, {"identity", e.identity}};
}
void from_json(const Json& j, DeviceEvent& e) {
  e.news = valueJson(kDeviceNewsNames, j.at("news"), "device news");
  j.at("address").get_to(e.address);
  j.at("identity").get_to(e.identity);
}

void to_json(Json& j, const WorkerCall& c) {
  j = Json{{"kind", nameJson(WorkerCall::kKindNames, c.kind)}, {"hotplug", c.hotplug}, {"device", c.device}};
}
void from_json(const Json& j, WorkerCall& c) {
  c.kind = valueJson(WorkerCall::kKindNames, j.at("kind"), "call");
  j.at("hotplug").get_to(c.hotplug);
  j.at("device").get_to(c.device);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CallError, name, message)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ExportNews, path, error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Batch, hot, cold)
// NOLINTEND(readability-identifier-naming)

namespace {

// The counters that cross the wire: unsigned, all of them (nlohmann would take -1 as 2^64-1).
constexpr std::array<std::pair<const char*, uint64_t Counters::*>, 7> kCounterFields{
    {{"done", &Counters::done},
     {"advised", &Counters::advised},
     {"refused", &Counters::refused},
     {"failed", &Counters::failed},
     {"reverted", &Counters::reverted},
     {"revertFailed", &Counters::revertFailed},
     {"drift", &Counters::drift}}};

Json countersJson(const Counters& c) {
  Json j = Json::object();
  for (const auto& [name, field] : kCounterFields) j[name] = c.*field;
  return j;
}

Counters countersOf(const Json& j) {
  if (!j.is_object()) throw std::invalid_argument("the counters are no object");
  Counters c;
  for (const auto& [name, field] : kCounterFields) {
    const Json& v = j.at(name);
    if (!v.is_number_unsigned()) throw std::invalid_argument(std::string(name) + " is no unsigned number");
    c.*field = v.get<uint64_t>();
  }
  return c;
}

// An optional part of a message: absent, or the value.
template <class T>
void optionalInto(const Json& j, const char* key, std::optional<T>& into) {
  if (j.contains(key)) into = j.at(key).get<T>();
}

WorkerReport reportOf(const Json& j) {
  WorkerReport r;
  j.at("devices").get_to(r.devices);
  j.at("actions").get_to(r.actions);
  r.counters = countersOf(j.at("counters"));
  j.at("exports").get_to(r.exports);
  optionalInto(j, "error", r.error);
  optionalInto(j, "plan", r.planJson);
  optionalInto(j, "host", r.host);
  if (j.contains("changed")) j.at("changed").get_to(r.changed);
  j.at("complete").get_to(r.complete);
  return r;
}

WorkerRequest requestOf(const Json& j) {
  WorkerRequest r;
  r.kind = valueJson(WorkerRequest::kKindNames, j.at("kind"), "request");
  j.at("batch").get_to(r.batch);
  j.at("call").get_to(r.call);
  j.at("wantsView").get_to(r.wantsView);
  j.at("busView").get_to(r.busView);
  r.counters = countersOf(j.at("counters"));
  j.at("departed").get_to(r.departed);
  return r;
}

// Invalid UTF-8 (a device name from sysfs) is replaced, not thrown at.
std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Decodes `bytes` as `what` (the daemon's request, the worker's report).
template <class T>
core::Result<T> decode(std::string_view bytes, const char* what, T (*of)(const Json&)) {
  Json j = Json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return core::Error{EPROTO, "", std::string(what) + " is no JSON object"};
  try {
    return of(j);
  } catch (const std::exception& e) {  // a missing field, a wrong type, an unknown name
    return core::Error{EPROTO, "", std::string(what) + " is malformed: " + e.what()};
  }
}

}  // namespace

std::string encodeRequest(const WorkerRequest& r) {
  return dump(Json{{"kind", nameJson(WorkerRequest::kKindNames, r.kind)},
                   {"batch", r.batch},
                   {"call", r.call},
                   {"wantsView", r.wantsView},
                   {"busView", r.busView},
                   {"counters", countersJson(r.counters)},
                   {"departed", r.departed}});
}

core::Result<WorkerRequest> decodeRequest(std::string_view bytes) {
  return decode(bytes, "the daemon's request", requestOf);
}

std::string encodeReport(const WorkerReport& report) {
  Json j{{"devices", report.devices},
         {"actions", report.actions},
         {"counters", countersJson(report.counters)},
         {"exports", report.exports},
         {"complete", report.complete}};
  if (report.error) j["error"] = *report.error;
  if (report.planJson) j["plan"] = *report.planJson;
  if (report.host) j["host"] = *report.host;
  if (!report.changed.empty()) j["changed"] = report.changed;
  return dump(j);
}

core::Result<WorkerReport> decodeReport(std::string_view bytes) {
  return decode(bytes, "the worker's report", reportOf);
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
    return std::string(core::nameOf(WorkerCall::kKindNames, work.call.kind));
  }
  if (work.batch.whole()) return "coldplug";
  return work.batch.hot.empty() ? "change" : "hotplug";
}

}  // namespace iommud::app
