#include "adapters/dbus/manager_service.hpp"

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "support/unique_fd.hpp"

namespace iommud::adapters::dbus {

std::string oneLine(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

// --- PendingCall -------------------------------------------------------------------------------

PendingCall::PendingCall(sd_bus_message* m) : m_(sd_bus_message_ref(m)) {}

PendingCall::PendingCall(PendingCall&& other) noexcept : m_(other.m_) {
  other.m_ = nullptr;
}

PendingCall& PendingCall::operator=(PendingCall&& other) noexcept {
  if (this != &other) {
    if (m_ != nullptr) replyError(kErrorFailed, "the call was dropped");
    m_ = other.m_;
    other.m_ = nullptr;
  }
  return *this;
}

PendingCall::~PendingCall() {
  if (m_ != nullptr) replyError(kErrorFailed, "the call was dropped");
}

namespace {

int appendActions(sd_bus_message* reply, const std::vector<Action>& actions) {
  int r = sd_bus_message_open_container(reply, 'a', "(ssss)");
  for (const auto& a : actions) {
    if (r < 0) return r;
    r = sd_bus_message_append(reply, "(ssss)", a.time.c_str(), a.result.c_str(), a.device.c_str(), a.message.c_str());
  }
  return r < 0 ? r : sd_bus_message_close_container(reply);
}

int appendStrings(sd_bus_message* m, const std::vector<std::string>& strings) {
  int r = sd_bus_message_open_container(m, 'a', "s");
  for (const auto& s : strings) {
    if (r < 0) return r;
    r = sd_bus_message_append_basic(m, 's', s.c_str());
  }
  return r < 0 ? r : sd_bus_message_close_container(m);
}

}  // namespace

void PendingCall::replyActions(const std::vector<Action>& actions) {
  if (m_ == nullptr) return;
  sd_bus_message* reply = nullptr;
  int r = sd_bus_message_new_method_return(m_, &reply);
  if (r >= 0) r = appendActions(reply, actions);
  if (r >= 0) r = sd_bus_send(nullptr, reply, nullptr);
  sd_bus_message_unref(reply);
  if (r < 0) {
    replyError(kErrorFailed, std::string("cannot send the answer: ") + std::strerror(-r));
    return;
  }
  m_ = sd_bus_message_unref(m_);
}

void PendingCall::replyText(const std::string& text) {
  if (m_ == nullptr) return;
  (void)sd_bus_reply_method_return(m_, "s", text.c_str());
  m_ = sd_bus_message_unref(m_);
}

void PendingCall::replyEmpty() {
  if (m_ == nullptr) return;
  (void)sd_bus_reply_method_return(m_, "");
  m_ = sd_bus_message_unref(m_);
}

void PendingCall::replyError(const char* name, const std::string& message) {
  if (m_ == nullptr) return;
  sd_bus_error e = SD_BUS_ERROR_MAKE_CONST(name, message.c_str());
  (void)sd_bus_reply_method_error(m_, &e);
  m_ = sd_bus_message_unref(m_);
}

// --- the object ----------------------------------------------------------------------------------

namespace {

const ManagerService::Handlers& handlersOf(void* userdata) {
  return static_cast<ManagerService*>(userdata)->handlers();
}

// The caller's effective uid; the bus daemon vouches for it.
int callerEuid(sd_bus_message* m, uid_t* uid) {
  sd_bus_creds* creds = nullptr;
  // On a bus connection sd-bus asks the bus (GetConnectionUnixUser): the uid the caller had when it
  // connected, which the caller cannot forge. One round trip to the bus, for a guarded call or a
  // Plan (bounded per user) only.
  int r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds);
  if (r >= 0) r = sd_bus_creds_get_euid(creds, uid);
  sd_bus_creds_unref(creds);
  return r;
}

ManagerService& serviceOf(void* userdata) {
  return *static_cast<ManagerService*>(userdata);
}

// A device is a PCI address or an interface or NVMe name: short. A longer one is refused before it
// is queued (a caller could otherwise park megabytes in the queue).
int checkDevice(const char* device, sd_bus_error* error) {
  constexpr size_t kMaxDevice = 64;
  if (std::strlen(device) > kMaxDevice) {
    return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "a device name is at most %zu characters", kMaxDevice);
  }
  return 1;
}

int methodPlan(sd_bus_message* m, void* userdata, sd_bus_error* error) {
  int hotplug = 0;
  const char* device = nullptr;
  if (int r = sd_bus_message_read(m, "bs", &hotplug, &device); r < 0) return r;
  if (int r = checkDevice(device, error); r <= 0) return r;
  // Anyone may ask for a plan; how many of one user's may wait is bounded by the user.
  uid_t caller = 0;
  if (int r = callerEuid(m, &caller); r < 0) {
    return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "cannot tell who is calling: %s", std::strerror(-r));
  }
  handlersOf(userdata).plan(PendingCall(m), hotplug != 0, device, caller);
  return 1;
}

int methodApply(sd_bus_message* m, void* userdata, sd_bus_error* error) {
  int hotplug = 0;
  const char* device = nullptr;
  if (int r = sd_bus_message_read(m, "bs", &hotplug, &device); r < 0) return r;
  if (int r = checkDevice(device, error); r <= 0) return r;
  serviceOf(userdata).authorize(m, Guarded::Apply,
                                [userdata, hotplug, d = std::string(device)](PendingCall call, uid_t caller) {
                                  handlersOf(userdata).apply(std::move(call), hotplug != 0, d, caller);
                                });
  return 1;
}

int methodRevert(sd_bus_message* m, void* userdata, sd_bus_error* error) {
  const char* device = nullptr;
  if (int r = sd_bus_message_read(m, "s", &device); r < 0) return r;
  if (int r = checkDevice(device, error); r <= 0) return r;
  serviceOf(userdata).authorize(m, Guarded::Revert,
                                [userdata, d = std::string(device)](PendingCall call, uid_t caller) {
                                  handlersOf(userdata).revert(std::move(call), d, caller);
                                });
  return 1;
}

int methodWatchDma(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) {
  serviceOf(userdata).watchDma(m);
  return 1;
}

int methodUnwatchDma(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) {
  if (const char* sender = sd_bus_message_get_sender(m); sender != nullptr) serviceOf(userdata).unwatchDma(sender);
  return sd_bus_reply_method_return(m, "");
}

int methodReload(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) {
  serviceOf(userdata).authorize(m, Guarded::Reload, [userdata](PendingCall call, uid_t /*caller*/) {
    handlersOf(userdata).reload(std::move(call));
  });
  return 1;
}

// Property getters: sd-bus passes (bus, path, interface, property, reply, userdata, error).
#define IOMMUD_GETTER(name)                                                                        \
  int name(sd_bus* /*bus*/, const char* /*path*/, const char* /*iface*/, const char* /*property*/, \
           sd_bus_message* reply, void* userdata, sd_bus_error* /*error*/)

IOMMUD_GETTER(getVersion) {
  (void)userdata;
  return sd_bus_message_append(reply, "s", IOMMUD_VERSION);
}

IOMMUD_GETTER(getState) {
  return sd_bus_message_append(reply, "s", handlersOf(userdata).daemon().state.c_str());
}
IOMMUD_GETTER(getSummary) {
  return sd_bus_message_append(reply, "s", handlersOf(userdata).daemon().summary.c_str());
}
IOMMUD_GETTER(getStartedAt) {
  return sd_bus_message_append(reply, "s", handlersOf(userdata).daemon().startedAt.c_str());
}
IOMMUD_GETTER(getLastRunAt) {
  return sd_bus_message_append(reply, "s", handlersOf(userdata).daemon().lastRunAt.c_str());
}
IOMMUD_GETTER(getRules) {
  return sd_bus_message_append(reply, "u", handlersOf(userdata).daemon().rules);
}
IOMMUD_GETTER(getRecent) {
  return appendActions(reply, handlersOf(userdata).daemon().recent);
}

IOMMUD_GETTER(getVendor) {
  return sd_bus_message_append(reply, "s", handlersOf(userdata).host().vendor.c_str());
}
IOMMUD_GETTER(getMode) {
  return sd_bus_message_append(reply, "s", handlersOf(userdata).host().mode.c_str());
}

IOMMUD_GETTER(getGroups) {
  int r = sd_bus_message_open_container(reply, 'a', "(isas)");
  for (const auto& g : handlersOf(userdata).host().groups) {
    if (r >= 0) r = sd_bus_message_open_container(reply, 'r', "isas");
    if (r >= 0) r = sd_bus_message_append(reply, "is", g.id, g.type.c_str());
    if (r >= 0) r = appendStrings(reply, g.devices);
    if (r >= 0) r = sd_bus_message_close_container(reply);
    if (r < 0) return r;
  }
  return r < 0 ? r : sd_bus_message_close_container(reply);
}

IOMMUD_GETTER(getDevices) {
  int r = sd_bus_message_open_container(reply, 'a', "(sssib)");
  for (const auto& d : handlersOf(userdata).host().devices) {
    if (r < 0) return r;
    r = sd_bus_message_append(reply, "(sssib)", d.address.c_str(), d.name.c_str(), d.driver.c_str(), d.group,
                              static_cast<int>(d.untrusted));
  }
  return r < 0 ? r : sd_bus_message_close_container(reply);
}

IOMMUD_GETTER(getFindings) {
  int r = sd_bus_message_open_container(reply, 'a', "(sss)");
  for (const auto& f : handlersOf(userdata).host().findings) {
    if (r < 0) return r;
    r = sd_bus_message_append(reply, "(sss)", f.id.c_str(), f.severity.c_str(), f.title.c_str());
  }
  return r < 0 ? r : sd_bus_message_close_container(reply);
}

IOMMUD_GETTER(getChanges) {
  int r = sd_bus_message_open_container(reply, 'a', "(sssssss)");
  for (const auto& c : handlersOf(userdata).host().changes) {
    if (r < 0) return r;
    r = sd_bus_message_append(reply, "(sssssss)", c.time.c_str(), c.device.c_str(), c.object.c_str(), c.key.c_str(),
                              c.from.c_str(), c.to.c_str(), c.rule.c_str());
  }
  return r < 0 ? r : sd_bus_message_close_container(reply);
}

#undef IOMMUD_GETTER

constexpr uint64_t kChanges = SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE;

const sd_bus_vtable kVtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", getVersion, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("State", "s", getState, 0, kChanges),
    SD_BUS_PROPERTY("Summary", "s", getSummary, 0, kChanges),
    SD_BUS_PROPERTY("StartedAt", "s", getStartedAt, 0, kChanges),
    SD_BUS_PROPERTY("LastRunAt", "s", getLastRunAt, 0, kChanges),
    SD_BUS_PROPERTY("Rules", "u", getRules, 0, kChanges),
    SD_BUS_PROPERTY("RecentActions", "a(ssss)", getRecent, 0, kChanges),
    SD_BUS_PROPERTY("Vendor", "s", getVendor, 0, kChanges),
    SD_BUS_PROPERTY("Mode", "s", getMode, 0, kChanges),
    SD_BUS_PROPERTY("Groups", "a(isas)", getGroups, 0, kChanges),
    SD_BUS_PROPERTY("Devices", "a(sssib)", getDevices, 0, kChanges),
    SD_BUS_PROPERTY("Findings", "a(sss)", getFindings, 0, kChanges),
    SD_BUS_PROPERTY("Changes", "a(sssssss)", getChanges, 0, kChanges),
    SD_BUS_METHOD_WITH_NAMES("Plan", "bs", SD_BUS_PARAM(hotplug) SD_BUS_PARAM(device), "s", SD_BUS_PARAM(plan_json),
                             methodPlan, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Apply", "bs", SD_BUS_PARAM(hotplug) SD_BUS_PARAM(device), "a(ssss)",
                             SD_BUS_PARAM(actions), methodApply, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Revert", "s", SD_BUS_PARAM(device), "a(ssss)", SD_BUS_PARAM(actions), methodRevert,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Reload", "", "", methodReload, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("WatchDma", "", "", methodWatchDma, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("UnwatchDma", "", "", methodUnwatchDma, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_NAMES("Acted", "sa(ssss)", SD_BUS_PARAM(trigger) SD_BUS_PARAM(actions), 0),
    SD_BUS_SIGNAL_WITH_NAMES("Measured", "a(ssddddddssb)dd",
                             SD_BUS_PARAM(effects) SD_BUS_PARAM(host_maps_before) SD_BUS_PARAM(host_maps_after), 0),
    SD_BUS_SIGNAL_WITH_NAMES("DmaRates", "dba(ssdddt)",
                             SD_BUS_PARAM(seconds) SD_BUS_PARAM(maps_attributed) SD_BUS_PARAM(devices), 0),
    SD_BUS_VTABLE_END,
};

}  // namespace

namespace {

int onNameRequested(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) {
  serviceOf(userdata).nameRequested(m);
  return 1;
}

// sd-bus tells a lost connection as the signal Disconnected of org.freedesktop.DBus.Local, which it
// makes itself and passes through the filters.
int onMessage(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) {
  if (sd_bus_message_is_signal(m, "org.freedesktop.DBus.Local", "Disconnected") > 0) serviceOf(userdata).disconnected();
  return 0;  // others go on to the object
}

int onRetry(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) {
  serviceOf(userdata).retry();
  return 0;
}

// A watcher's track is empty: its name left the bus.
int onWatcherLeft(sd_bus_track* /*track*/, void* userdata) {
  auto* w = static_cast<ManagerService::Watcher*>(userdata);
  w->service.unwatchDma(std::string(w->name));  // a copy: this destroys *w (sd-bus holds the track until we return)
  return 1;
}

}  // namespace

ManagerService::Connection::~Connection() {
  sd_bus_slot_unref(object);
  sd_bus_slot_unref(filter);
  if (bus != nullptr) {
    sd_bus_detach_event(bus);
    sd_bus_flush_close_unref(bus);
  }
}

core::Result<std::unique_ptr<ManagerService>> ManagerService::start(sd_event* loop, Handlers handlers,
                                                                    core::Backoff backoff) {
  std::unique_ptr<ManagerService> s(new ManagerService(loop, std::move(handlers), backoff));
  if (auto r = s->connect(); !r) return r.error();
  return s;
}

core::Result<core::Done> ManagerService::connect() {
  auto fail = [](int r, const std::string& what) { return core::Error{-r, "", what + ": " + std::strerror(-r)}; };
  auto c = std::make_unique<Connection>();
  if (int r = sd_bus_open_system(&c->bus); r < 0) return fail(r, "cannot connect to the system bus");
  // A lost bus is ours to handle (Disconnected below), never a reason for the loop to end.
  (void)sd_bus_set_exit_on_disconnect(c->bus, 0);
  if (int r = sd_bus_add_filter(c->bus, &c->filter, onMessage, this); r < 0) {
    return fail(r, "cannot watch the connection");
  }
  if (int r = sd_bus_add_object_vtable(c->bus, &c->object, kObjectPath, kInterface, kVtable, this); r < 0) {
    return fail(r, "cannot export " + std::string(kObjectPath));
  }
  if (int r = sd_bus_attach_event(c->bus, loop_, SD_EVENT_PRIORITY_NORMAL); r < 0) {
    return fail(r, "cannot attach the bus to the event loop");
  }
  // Asynchronously: the start's pass over the devices must not wait for a bus daemon that is
  // still starting. Its answer arrives in the loop.
  if (int r = sd_bus_request_name_async(c->bus, nullptr, kBusName, 0, onNameRequested, this); r < 0) {
    return fail(r, "cannot ask for the bus name " + std::string(kBusName));
  }
  c->socket = sd_bus_get_fd(c->bus);
  conn_ = std::move(c);
  return core::Done{};
}

void ManagerService::nameRequested(sd_bus_message* reply) {
  // A connection that closes answers its calls in flight with errors of its own: that is not the
  // bus refusing the name, and Disconnected follows.
  if (conn_ == nullptr || sd_bus_is_open(conn_->bus) <= 0) return;
  if (const sd_bus_error* e = sd_bus_message_get_error(reply); e != nullptr) {
    if (handlers_.nameLost) handlers_.nameLost(std::string(e->name) + ": " + (e->message != nullptr ? e->message : ""));
  }
  if (attempt_ == 0) return;
  // Back: the bus answered. Clients on the new bus read the properties afresh; those that watch
  // them hear that they may have changed while the bus was away.
  const unsigned attempts = attempt_;
  attempt_ = 0;
  if (handlers_.link) handlers_.link({BusLinkEvent::Kind::Restored, attempts, {}, {}});
  propertiesChanged(Properties::Host);
  propertiesChanged(Properties::Daemon);
}

void ManagerService::disconnected() {
  if (retryTimer_ != nullptr) return;  // already waiting to retry
  if (attempt_ == 0 && handlers_.link) handlers_.link({BusLinkEvent::Kind::Lost, 0, {}, {}});
  schedule("the bus closed the connection");
}

void ManagerService::schedule(const std::string& why) {
  const auto delay = backoff_.delay(attempt_);
  ++attempt_;
  if (attempt_ > 1 && handlers_.link) handlers_.link({BusLinkEvent::Kind::Retrying, attempt_ - 1, delay, why});
  sd_event_source* timer = nullptr;
  const auto usec = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(delay).count());
  if (int r = sd_event_add_time_relative(loop_, &timer, CLOCK_MONOTONIC, usec, 0, onRetry, this); r < 0) {
    // Out of memory for a timer: no retry; the daemon goes on without its API.
    if (handlers_.link) {
      handlers_.link({BusLinkEvent::Kind::Retrying, attempt_, delay, std::string("no timer: ") + std::strerror(-r)});
    }
    return;
  }
  retryTimer_.reset(timer);
}

void ManagerService::retry() {
  retryTimer_.reset();
  // The old connection goes here, outside its own callbacks; its watchers' names mean nothing on
  // the next (they watch again).
  polkit_.forget();
  dropWatchers(true);
  conn_.reset();
  if (auto r = connect(); !r) schedule(r.error().describe());
  // Connected: nameRequested() says so when the bus answers; a connection that fails later comes
  // back through disconnected().
}

void ManagerService::authorize(sd_bus_message* m, Guarded method, std::function<void(PendingCall, uid_t)> granted) {
  uid_t uid = 0;
  if (int r = callerEuid(m, &uid); r < 0) {
    PendingCall(m).replyError(SD_BUS_ERROR_ACCESS_DENIED,
                              std::string("cannot tell who is calling: ") + std::strerror(-r));
    return;
  }
  if (accessFor(uid).kind == AccessDecision::Kind::Granted) {
    granted(PendingCall(m), uid);
    return;
  }
  const char* sender = sd_bus_message_get_sender(m);
  auto call = std::make_shared<PendingCall>(m);
  auto decide = [call, method, uid, granted = std::move(granted)](const PolkitAnswer& answer) {
    auto decision = accessFor(method, answer);
    if (decision.kind == AccessDecision::Kind::Granted) {
      granted(std::move(*call), uid);
    } else {
      call->replyError(SD_BUS_ERROR_ACCESS_DENIED, decision.message);
    }
  };
  // Each question waits for polkit, which may wait for a person: bounded, in all and per user.
  if (auto refused = polkitQuestionRefused(polkit_.inFlight(), polkit_.inFlightFor(uid))) {
    call->replyError(SD_BUS_ERROR_LIMITS_EXCEEDED, *refused);
    return;
  }
  if (sender == nullptr || conn_ == nullptr) {
    decide({PolkitAnswer::Kind::Unavailable, "the caller has no bus name"});
    return;
  }
  polkit_.check(conn_->bus, sender, uid, polkitAction(method),
                sd_bus_message_get_allow_interactive_authorization(m) > 0, decide);
}

void ManagerService::closeInChild() {
  if (conn_ != nullptr) support::UniqueFd(std::exchange(conn_->socket, -1)).reset();
}

ManagerService::~ManagerService() {
  retryTimer_.reset();
  polkit_.forget();
  dropWatchers(false);
  conn_.reset();
}

void ManagerService::propertiesChanged(Properties which) {
  static const char* host[] = {"Vendor", "Mode", "Groups", "Devices", "Findings", "Changes", nullptr};
  static const char* daemon[] = {"State", "Summary", "StartedAt", "LastRunAt", "Rules", "RecentActions", nullptr};
  // sd-bus takes char** but does not change the names.
  char** names =
      const_cast<char**>(which == Properties::Host ? host : daemon);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  if (conn_ == nullptr) return;
  (void)sd_bus_emit_properties_changed_strv(conn_->bus, kObjectPath, kInterface, names);
}

void ManagerService::acted(const std::string& trigger, const std::vector<Action>& actions) {
  if (conn_ == nullptr) return;
  sd_bus_message* m = nullptr;
  int r = sd_bus_message_new_signal(conn_->bus, &m, kObjectPath, kInterface, "Acted");
  if (r >= 0) r = sd_bus_message_append(m, "s", trigger.c_str());
  if (r >= 0) r = appendActions(m, actions);
  if (r >= 0) (void)sd_bus_send(conn_->bus, m, nullptr);
  sd_bus_message_unref(m);
}

void ManagerService::measured(const std::vector<EffectView>& effects, double hostMapsBefore, double hostMapsAfter) {
  if (conn_ == nullptr) return;
  sd_bus_message* m = nullptr;
  int r = sd_bus_message_new_signal(conn_->bus, &m, kObjectPath, kInterface, "Measured");
  if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(ssddddddssb)");
  for (const auto& e : effects) {
    if (r < 0) break;
    r = sd_bus_message_append(m, "(ssddddddssb)", e.device.c_str(), e.name.c_str(), e.secondsBefore, e.secondsAfter,
                              e.mapsBefore, e.mapsAfter, e.bouncesBefore, e.bouncesAfter, e.translatedBefore.c_str(),
                              e.translatedAfter.c_str(), static_cast<int>(e.mapsAttributed));
  }
  if (r >= 0) r = sd_bus_message_close_container(m);
  if (r >= 0) r = sd_bus_message_append(m, "dd", hostMapsBefore, hostMapsAfter);
  if (r >= 0) (void)sd_bus_send(conn_->bus, m, nullptr);
  sd_bus_message_unref(m);
}

ManagerService::Watcher::~Watcher() {
  sd_bus_track_unref(track);
}

void ManagerService::watchDma(sd_bus_message* m) {
  const char* sender = sd_bus_message_get_sender(m);
  if (sender == nullptr || conn_ == nullptr) {
    PendingCall(m).replyError(kErrorFailed, "the caller has no bus name to watch");
    return;
  }
  if (watchers_.contains(sender)) {  // joins its own watch
    (void)sd_bus_reply_method_return(m, "");
    return;
  }
  auto w = std::make_unique<Watcher>(*this, sender);
  int r = sd_bus_track_new(conn_->bus, &w->track, onWatcherLeft, w.get());
  if (r >= 0) r = sd_bus_track_add_name(w->track, sender);
  if (r < 0) {
    PendingCall(m).replyError(kErrorFailed, std::string("cannot follow the caller on the bus: ") + std::strerror(-r));
    return;
  }
  if (auto why = handlers_.watchDma(sender)) {
    PendingCall(m).replyError(kErrorCannotMeasure, *why);
    return;
  }
  watchers_.emplace(sender, std::move(w));
  (void)sd_bus_reply_method_return(m, "");
}

void ManagerService::unwatchDma(const std::string& sender) {
  if (watchers_.erase(sender) > 0) handlers_.unwatchDma(sender);
}

void ManagerService::dropWatchers(bool tell) {
  auto gone = std::move(watchers_);
  watchers_.clear();
  if (!tell) return;
  for (const auto& [name, w] : gone) handlers_.unwatchDma(name);
}

void ManagerService::dmaRates(double seconds, bool mapsAttributed, const std::vector<DmaRateView>& devices) {
  if (conn_ == nullptr) return;
  sd_bus_message* m = nullptr;
  int r = sd_bus_message_new_signal(conn_->bus, &m, kObjectPath, kInterface, "DmaRates");
  if (r >= 0) r = sd_bus_message_append(m, "db", seconds, static_cast<int>(mapsAttributed));
  if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(ssdddt)");
  for (const auto& d : devices) {
    if (r < 0) break;
    r = sd_bus_message_append(m, "(ssdddt)", d.device.c_str(), d.name.c_str(), d.mapsPerSecond, d.mappedMiBPerSecond,
                              d.bouncesPerSecond, d.faults);
  }
  if (r >= 0) r = sd_bus_message_close_container(m);
  if (r >= 0) (void)sd_bus_send(conn_->bus, m, nullptr);
  sd_bus_message_unref(m);
}

}  // namespace iommud::adapters::dbus
