#include "adapters/dbus/access.hpp"

namespace iommud::adapters::dbus {

const char* methodName(Guarded method) {
  return core::nameOf(kGuardedNames, method).data();
}

const char* polkitAction(Guarded method) {
  switch (method) {
    case Guarded::Apply: return "org.iommud1.apply";
    case Guarded::Revert: return "org.iommud1.revert";
    case Guarded::Reload: return "org.iommud1.reload";
  }
  return "?";
}

std::optional<std::string> polkitQuestionRefused(size_t waiting, size_t waitingForUser) {
  if (waitingForUser >= kMaxPolkitQuestionsPerUser) {
    return std::to_string(waitingForUser) +
           " calls of this user wait for polkit's answer already (an authentication agent may be asking for a "
           "password); answer or cancel those first";
  }
  if (waiting >= kMaxPolkitQuestions) return "too many calls wait for polkit's answer; try again later";
  return std::nullopt;
}

AccessDecision accessFor(uid_t callerEuid) {
  if (callerEuid == 0) return {AccessDecision::Kind::Granted, {}};
  return {AccessDecision::Kind::AskPolkit, {}};
}

AccessDecision accessFor(Guarded method, const PolkitAnswer& answer) {
  using Kind = PolkitAnswer::Kind;
  // It begins with the words of the uid-only check it replaced: callers that read them still do.
  const std::string head =
      std::string(methodName(method)) + " changes the running system and needs root or the polkit authorization ";
  const std::string action = polkitAction(method);
  switch (answer.kind) {
    case Kind::Authorized: return {AccessDecision::Kind::Granted, {}};
    case Kind::Challenge:
      return {AccessDecision::Kind::Denied,
              head + action + ", which polkit gives only after authentication (no agent answered)"};
    case Kind::NotAuthorized: return {AccessDecision::Kind::Denied, head + action + ", which polkit refused"};
    case Kind::Unavailable:
      return {AccessDecision::Kind::Denied, head + action + ", but polkit is not available" +
                                                (answer.detail.empty() ? "" : " (" + answer.detail + ")")};
  }
  return {AccessDecision::Kind::Denied, head + action};
}

}  // namespace iommud::adapters::dbus
