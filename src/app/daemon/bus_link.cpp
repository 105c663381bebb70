#include "app/daemon/bus_link.hpp"

#include <string>

namespace iommud::app {

adapters::systemd::Entry busLinkEntry(const adapters::dbus::BusLinkEvent& e) {
  using Kind = adapters::dbus::BusLinkEvent::Kind;
  using adapters::systemd::Priority;
  const std::string name = adapters::dbus::kBusName;
  switch (e.kind) {
    case Kind::Lost:
      return {Priority::Warning,
              {},
              "the system bus closed iommud's connection (dbus-daemon restarted or stopped): no D-Bus API until "
              "it is back; policies and hotplug go on, reconnecting",
              {}};
    case Kind::Retrying:
      return {Priority::Debug,
              {},
              "reconnection " + std::to_string(e.attempt) + " to the system bus failed (" + e.error + "), next in " +
                  std::to_string(e.delay.count()) + " ms",
              {}};
    case Kind::Restored:
      return {Priority::Notice,
              {},
              "back on the system bus after " + std::to_string(e.attempt) + " attempt" + (e.attempt == 1 ? "" : "s") +
                  ": " + name + " asked for again",
              {}};
  }
  return {Priority::Info, {}, "system bus", {}};
}

std::unique_ptr<adapters::dbus::ManagerService> serveOnBus(adapters::systemd::EventLoop& loop,
                                                           const adapters::systemd::Log& log, const BusCalls& calls) {
  namespace bus = adapters::dbus;
  using Kind = WorkerCall::Kind;
  bus::ManagerService::Handlers h;
  h.host = calls.host;
  h.daemon = calls.daemon;
  h.watchDma = calls.watchDma;
  h.unwatchDma = calls.unwatchDma;
  h.plan = [call = calls.call](bus::PendingCall reply, bool hotplug, std::string device, uid_t caller) {
    call({Kind::Plan, hotplug, std::move(device)}, std::move(reply), caller);
  };
  h.apply = [call = calls.call](bus::PendingCall reply, bool hotplug, std::string device, uid_t caller) {
    call({Kind::Apply, hotplug, std::move(device)}, std::move(reply), caller);
  };
  h.revert = [call = calls.call](bus::PendingCall reply, std::string device, uid_t caller) {
    call({Kind::Revert, false, std::move(device)}, std::move(reply), caller);
  };
  h.reload = [reload = calls.reload](bus::PendingCall reply) {
    auto problems = reload();
    if (problems.empty()) {
      reply.replyEmpty();
      return;
    }
    std::string text;
    for (const auto& p : problems) text += (text.empty() ? "" : "\n") + p;
    reply.replyError(bus::kErrorInvalidPolicy, text);
  };
  h.nameLost = [&log](const std::string& why) {
    log.warning("no D-Bus API: the bus refused the name " + std::string(bus::kBusName) + " (" + why +
                "); is /usr/share/dbus-1/system.d/org.iommud1.conf installed?");
  };
  h.link = [&log](const bus::BusLinkEvent& e) { log.write(busLinkEntry(e)); };
  auto service = bus::ManagerService::start(loop.get(), std::move(h));
  if (!service) {
    log.notice("no D-Bus API (" + service.error().describe() + "); iommuctl works on the host itself");
    return nullptr;
  }
  return std::move(service).value();
}

}  // namespace iommud::app
