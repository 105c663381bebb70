#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "adapters/dbus/access.hpp"

struct sd_bus;

namespace iommud::adapters::dbus {

/// Asks polkit (org.freedesktop.PolicyKit1.Authority.CheckAuthorization on the system bus) whether
/// a caller, named by its unique bus name (a `system-bus-name` subject), may do an action. Never
/// blocks: the answer arrives on the bus's event loop.
class PolkitClient {
 public:
  using Done = std::function<void(PolkitAnswer)>;

  PolkitClient() = default;
  PolkitClient(const PolkitClient&) = delete;
  PolkitClient& operator=(const PolkitClient&) = delete;
  ~PolkitClient() = default;

  /// Sends the question; `done` runs once with the answer (Unavailable when the call cannot be
  /// sent, polkitd is not there or does not answer within `timeoutUsec`), unless forget() comes
  /// first. `interactive`: the caller allowed interactive authorization, so polkit may ask an
  /// authentication agent.
  /// `uid`: the caller's, for inFlightFor().
  void check(sd_bus* bus, const std::string& sender, uid_t uid, const char* action, bool interactive, Done done);

  /// Forgets the questions in flight: their `done` never runs. Before their connection goes.
  void forget() { waiting_.clear(); }
  [[nodiscard]] size_t inFlight() const { return waiting_.size(); }
  /// The questions in flight for callers with this uid.
  [[nodiscard]] size_t inFlightFor(uid_t uid) const;

  /// An answer's body `(bba{ss})` read: is_authorized, is_challenge.
  static PolkitAnswer answerOf(bool authorized, bool challenge);

  /// The reply callback's entry: runs question `id`'s `done`, unless it was forgotten.
  void answered(uint64_t id, PolkitAnswer answer);

 private:
  struct Question {
    uid_t uid;
    Done done;
  };
  std::map<uint64_t, Question> waiting_;
  uint64_t next_ = 0;
};

}  // namespace iommud::adapters::dbus
