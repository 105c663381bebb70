#include "adapters/dbus/manager_client.hpp"

#include <systemd/sd-bus.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace iommud::adapters::dbus {

namespace {

// A change may unbind drivers that take seconds to let go, behind another batch: wait long.
constexpr uint64_t kCallTimeoutUsec = 600ULL * 1000 * 1000;

core::Error busError(const sd_bus_error& e, int r, const std::string& what) {
  if (sd_bus_error_is_set(&e) != 0) {
    int code = sd_bus_error_get_errno(&e);
    return core::Error{code, "", e.message != nullptr ? e.message : e.name};
  }
  return core::Error{-r, "", what + ": " + std::strerror(-r)};
}

core::Result<std::vector<Action>> readActions(sd_bus_message* m) {
  std::vector<Action> out;
  int r = sd_bus_message_enter_container(m, 'a', "(ssss)");
  while (r > 0) {
    const char *time = nullptr, *result = nullptr, *device = nullptr, *message = nullptr;
    r = sd_bus_message_read(m, "(ssss)", &time, &result, &device, &message);
    if (r > 0) out.push_back(Action{time, result, device, message});
  }
  if (r >= 0) r = sd_bus_message_exit_container(m);
  if (r < 0) return core::Error{-r, "", std::string("cannot read the daemon's answer: ") + std::strerror(-r)};
  return out;
}

class Reply {
 public:
  Reply() = default;
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  ~Reply() {
    sd_bus_message_unref(m);
    sd_bus_error_free(&error);
  }
  sd_bus_message* m = nullptr;
  sd_bus_error error = SD_BUS_ERROR_NULL;
};

// Sends a method call whose arguments `fill` appends.
template <class Fill>
int invoke(sd_bus* bus, const char* method, Reply& reply, Fill fill) {
  sd_bus_message* call = nullptr;
  int r = sd_bus_message_new_method_call(bus, &call, kBusName, kObjectPath, kInterface, method);
  if (r >= 0) r = fill(call);
  if (r >= 0) r = sd_bus_call(bus, call, kCallTimeoutUsec, &reply.error, &reply.m);
  sd_bus_message_unref(call);
  return r;
}

}  // namespace

std::optional<ManagerClient> ManagerClient::connect() {
  sd_bus* bus = nullptr;
  if (sd_bus_open_system(&bus) < 0) return std::nullopt;
  ManagerClient client(bus);
  Reply reply;
  int r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "NameHasOwner", &reply.error, &reply.m, "s", kBusName);
  int owned = 0;
  if (r < 0 || sd_bus_message_read(reply.m, "b", &owned) < 0 || owned == 0) return std::nullopt;
  return client;
}

ManagerClient::ManagerClient(ManagerClient&& other) noexcept : bus_(other.bus_) {
  other.bus_ = nullptr;
}

ManagerClient& ManagerClient::operator=(ManagerClient&& other) noexcept {
  if (this != &other) {
    sd_bus_flush_close_unref(bus_);
    bus_ = other.bus_;
    other.bus_ = nullptr;
  }
  return *this;
}

ManagerClient::~ManagerClient() {
  sd_bus_flush_close_unref(bus_);
}

core::Result<std::vector<Action>> ManagerClient::apply(bool hotplug, const std::string& device) {
  Reply reply;
  int r = invoke(bus_, "Apply", reply, [&](sd_bus_message* m) {
    return sd_bus_message_append(m, "bs", static_cast<int>(hotplug), device.c_str());
  });
  if (r < 0) return busError(reply.error, r, "Apply");
  return readActions(reply.m);
}

core::Result<std::vector<Action>> ManagerClient::revert(const std::string& device) {
  Reply reply;
  int r =
      invoke(bus_, "Revert", reply, [&](sd_bus_message* m) { return sd_bus_message_append(m, "s", device.c_str()); });
  if (r < 0) return busError(reply.error, r, "Revert");
  return readActions(reply.m);
}

core::Result<std::string> ManagerClient::plan(bool hotplug, const std::string& device) {
  Reply reply;
  int r = invoke(bus_, "Plan", reply, [&](sd_bus_message* m) {
    return sd_bus_message_append(m, "bs", static_cast<int>(hotplug), device.c_str());
  });
  if (r < 0) return busError(reply.error, r, "Plan");
  const char* text = nullptr;
  if (r = sd_bus_message_read(reply.m, "s", &text); r < 0) return busError(reply.error, r, "Plan");
  return std::string(text);
}

core::Result<core::Done> ManagerClient::reload() {
  Reply reply;
  int r = invoke(bus_, "Reload", reply, [](sd_bus_message* /*m*/) { return 0; });
  if (r < 0) return busError(reply.error, r, "Reload");
  return core::Done{};
}

core::Result<DaemonSummary> ManagerClient::daemon() {
  DaemonSummary v;
  auto text = [&](const char* property, std::string& into) -> int {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    char* s = nullptr;
    int r = sd_bus_get_property_string(bus_, kBusName, kObjectPath, kInterface, property, &e, &s);
    sd_bus_error_free(&e);
    if (r >= 0) into = s;
    free(s);  // NOLINT(cppcoreguidelines-no-malloc): sd-bus allocates it
    return r;
  };
  int r = text("State", v.state);
  if (r >= 0) r = text("Summary", v.summary);
  if (r >= 0) r = text("StartedAt", v.startedAt);
  if (r >= 0) r = text("LastRunAt", v.lastRunAt);
  if (r >= 0) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    r = sd_bus_get_property_trivial(bus_, kBusName, kObjectPath, kInterface, "Rules", &e, 'u', &v.rules);
    sd_bus_error_free(&e);
  }
  if (r < 0) return core::Error{-r, "", std::string("cannot read the daemon's state: ") + std::strerror(-r)};
  Reply reply;
  r = sd_bus_get_property(bus_, kBusName, kObjectPath, kInterface, "RecentActions", &reply.error, &reply.m, "a(ssss)");
  if (r < 0) return busError(reply.error, r, "RecentActions");
  auto recent = readActions(reply.m);
  if (!recent) return recent.error();
  v.recent = std::move(recent).value();
  return v;
}

}  // namespace iommud::adapters::dbus
