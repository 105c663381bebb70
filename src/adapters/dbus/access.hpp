#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "core/names.hpp"

namespace iommud::adapters::dbus {

/// The methods that change the running system, each authorised through its own polkit action
/// (polkit/org.iommud1.policy).
enum class Guarded { Apply, Revert, Reload };
inline constexpr core::Names<Guarded, 3> kGuardedNames{
    {{Guarded::Apply, "Apply"}, {Guarded::Revert, "Revert"}, {Guarded::Reload, "Reload"}}};
static_assert(core::checkNames(kGuardedNames, Guarded::Reload));

/// "Apply", "Revert", "Reload" (kGuardedNames; the names are literals, so NUL-terminated).
const char* methodName(Guarded method);
/// "org.iommud1.apply", "org.iommud1.revert", "org.iommud1.reload".
const char* polkitAction(Guarded method);

/// What polkit answered to CheckAuthorization, as the client reads it.
struct PolkitAnswer {
  enum class Kind {
    Authorized,     // is_authorized
    Challenge,      // not authorised without authentication (no agent asked, or none answered)
    NotAuthorized,  // not authorised
    Unavailable,    // no answer: polkitd is not on the bus, or the call failed
  };
  Kind kind = Kind::Unavailable;
  std::string detail;  // for Unavailable: the D-Bus error (name: message)
};

/// Who may call a guarded method: root (euid 0) always, without asking polkit, so that the daemon
/// and iommuctl work where polkit is not installed or not running; anyone else only when polkit
/// says yes.
struct AccessDecision {
  enum class Kind { Granted, AskPolkit, Denied };
  Kind kind = Kind::Denied;
  std::string message;  // for Denied: what the caller reads in org.freedesktop.DBus.Error.AccessDenied
};

/// How many polkit questions may wait at once. Each may wait for a person at an authentication
/// agent (PolkitClient gives it 300 s), so there is a bound in all and a smaller one per caller:
/// per uid, over all its connections (a bus name has one uid, so this bounds a bus name too), so
/// that one user whose agent never answers cannot hold every place.
constexpr size_t kMaxPolkitQuestions = 32;
constexpr size_t kMaxPolkitQuestionsPerUser = 4;
/// Why one more question cannot wait, given how many wait in all and for the caller's uid
/// (nullopt: it can); the caller reads it in org.freedesktop.DBus.Error.LimitsExceeded.
std::optional<std::string> polkitQuestionRefused(size_t waiting, size_t waitingForUser);

/// The first step, before any bus traffic: root is granted, anyone else goes to polkit.
AccessDecision accessFor(uid_t callerEuid);
/// The second step, with polkit's answer for `method`'s action.
AccessDecision accessFor(Guarded method, const PolkitAnswer& answer);

}  // namespace iommud::adapters::dbus
