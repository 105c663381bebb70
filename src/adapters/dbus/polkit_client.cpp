#include "adapters/dbus/polkit_client.hpp"

#include <systemd/sd-bus.h>

#include <cstring>
#include <memory>

namespace iommud::adapters::dbus {

namespace {

// What the slot carries: which client and which question. Freed with the slot (its destroy
// callback), which outlives the client only on a connection that is closed and off the loop,
// where no reply is dispatched any more.
struct Ticket {
  PolkitClient* client;
  uint64_t id;
};

constexpr uint64_t kAllowUserInteraction = 1;  // CheckAuthorizationFlags
// A question with an agent may wait for a person typing a password; one without is answered at once.
constexpr uint64_t kInteractiveTimeoutUsec = 300ULL * 1000 * 1000;
constexpr uint64_t kTimeoutUsec = 25ULL * 1000 * 1000;

int buildQuestion(sd_bus* bus, sd_bus_message** m, const std::string& sender, const char* action, bool interactive) {
  int r = sd_bus_message_new_method_call(bus, m, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                         "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization");
  // subject (sa{sv}): a system-bus-name, which polkitd resolves through the bus to the caller's
  // process and uid itself (nothing the caller says is believed).
  if (r >= 0) r = sd_bus_message_open_container(*m, 'r', "sa{sv}");
  if (r >= 0) r = sd_bus_message_append(*m, "s", "system-bus-name");
  if (r >= 0) r = sd_bus_message_append(*m, "a{sv}", 1, "name", "s", sender.c_str());
  if (r >= 0) r = sd_bus_message_close_container(*m);
  // action_id, details a{ss} (none), flags, cancellation_id (none).
  if (r >= 0) {
    r = sd_bus_message_append(*m, "sa{ss}us", action, 0, static_cast<uint32_t>(interactive ? kAllowUserInteraction : 0),
                              "");
  }
  return r;
}

int onReply(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) {
  const auto* ticket = static_cast<const Ticket*>(userdata);
  if (const sd_bus_error* e = sd_bus_message_get_error(m); e != nullptr) {
    ticket->client->answered(ticket->id, {PolkitAnswer::Kind::Unavailable,
                                          std::string(e->name) + ": " + (e->message != nullptr ? e->message : "")});
    return 1;
  }
  int authorized = 0;
  int challenge = 0;
  int r = sd_bus_message_enter_container(m, 'r', "bba{ss}");
  if (r >= 0) r = sd_bus_message_read(m, "bb", &authorized, &challenge);
  if (r < 0) {
    ticket->client->answered(ticket->id, {PolkitAnswer::Kind::Unavailable,
                                          std::string("polkit's answer does not read: ") + std::strerror(-r)});
    return 1;
  }
  ticket->client->answered(ticket->id, PolkitClient::answerOf(authorized != 0, challenge != 0));
  return 1;
}

}  // namespace

PolkitAnswer PolkitClient::answerOf(bool authorized, bool challenge) {
  if (authorized) return {PolkitAnswer::Kind::Authorized, {}};
  if (challenge) return {PolkitAnswer::Kind::Challenge, {}};
  return {PolkitAnswer::Kind::NotAuthorized, {}};
}

size_t PolkitClient::inFlightFor(uid_t uid) const {
  size_t n = 0;
  for (const auto& [_, q] : waiting_) n += q.uid == uid ? 1 : 0;
  return n;
}

void PolkitClient::check(sd_bus* bus, const std::string& sender, uid_t uid, const char* action, bool interactive,
                         Done done) {
  auto unavailable = [](int r) { return PolkitAnswer{PolkitAnswer::Kind::Unavailable, std::strerror(-r)}; };
  sd_bus_message* m = nullptr;
  int r = buildQuestion(bus, &m, sender, action, interactive);
  if (r >= 0) r = sd_bus_message_set_allow_interactive_authorization(m, interactive ? 1 : 0);
  const uint64_t id = next_++;
  auto ticket = std::make_unique<Ticket>(Ticket{this, id});
  sd_bus_slot* slot = nullptr;
  if (r >= 0) {
    r = sd_bus_call_async(bus, &slot, m, onReply, ticket.get(), interactive ? kInteractiveTimeoutUsec : kTimeoutUsec);
  }
  sd_bus_message_unref(m);
  if (r < 0) {
    done(unavailable(r));
    return;
  }
  // The slot belongs to the bus from now on, and the ticket to the slot.
  (void)sd_bus_slot_set_destroy_callback(slot, [](void* t) { delete static_cast<Ticket*>(t); });
  (void)ticket.release();
  (void)sd_bus_slot_set_floating(slot, 1);
  sd_bus_slot_unref(slot);
  waiting_.emplace(id, Question{uid, std::move(done)});
}

void PolkitClient::answered(uint64_t id, PolkitAnswer answer) {
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;  // forgotten
  Done done = std::move(it->second.done);
  waiting_.erase(it);
  done(std::move(answer));
}

}  // namespace iommud::adapters::dbus
