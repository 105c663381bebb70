// The D-Bus side's pure pieces: the reconnection backoff, who may call Apply, Revert and Reload
// (root, or polkit's yes), and what the daemon logs when the bus goes and comes back.
#include "app/daemon/bus_link.hpp"

#include <gtest/gtest.h>

#include "adapters/dbus/access.hpp"
#include "adapters/dbus/polkit_client.hpp"
#include "core/backoff.hpp"

namespace bus_link_test {

namespace dbus = iommud::adapters::dbus;
using iommud::core::Backoff;
using namespace std::chrono_literals;
using Kind = dbus::AccessDecision::Kind;
using Answer = dbus::PolkitAnswer::Kind;

TEST(Backoff, DoublesFromTheFirstDelayUpToTheCeiling) {
  const Backoff b{100ms, 2000ms};
  EXPECT_EQ(b.delay(0), 100ms);
  EXPECT_EQ(b.delay(1), 200ms);
  EXPECT_EQ(b.delay(2), 400ms);
  EXPECT_EQ(b.delay(4), 1600ms);
  EXPECT_EQ(b.delay(5), 2000ms);
  EXPECT_EQ(b.delay(6), 2000ms);
  EXPECT_EQ(b.delay(4'000'000'000U), 2000ms);  // no overflow however long the bus stays away
}

TEST(Backoff, DefaultStartsAtATenthOfASecondAndWaitsAtMostTenSeconds) {
  const Backoff b;
  EXPECT_EQ(b.delay(0), 100ms);
  EXPECT_EQ(b.delay(100), 10s);
}

TEST(Backoff, ACeilingBelowTheFirstDelayWins) {
  EXPECT_EQ((Backoff{5s, 1s}.delay(0)), 1s);
  EXPECT_EQ((Backoff{0ms, 1s}.delay(3)), 0ms);
}

TEST(BusAccess, EachGuardedMethodHasItsOwnPolkitAction) {
  EXPECT_STREQ(dbus::polkitAction(dbus::Guarded::Apply), "org.iommud1.apply");
  EXPECT_STREQ(dbus::polkitAction(dbus::Guarded::Revert), "org.iommud1.revert");
  EXPECT_STREQ(dbus::polkitAction(dbus::Guarded::Reload), "org.iommud1.reload");
}

TEST(BusAccess, RootIsGrantedWithoutPolkitAndOthersAskIt) {
  EXPECT_EQ(dbus::accessFor(uid_t{0}).kind, Kind::Granted);
  EXPECT_EQ(dbus::accessFor(uid_t{1000}).kind, Kind::AskPolkit);
  EXPECT_EQ(dbus::accessFor(uid_t{65534}).kind, Kind::AskPolkit);
}

TEST(BusAccess, PolkitsYesGrants) {
  EXPECT_EQ(dbus::accessFor(dbus::Guarded::Apply, {Answer::Authorized, {}}).kind, Kind::Granted);
}

TEST(BusAccess, PolkitsNoDeniesNamingTheAction) {
  for (auto method : {dbus::Guarded::Apply, dbus::Guarded::Revert, dbus::Guarded::Reload}) {
    for (auto answer : {Answer::NotAuthorized, Answer::Challenge, Answer::Unavailable}) {
      auto d = dbus::accessFor(method, {answer, {}});
      EXPECT_EQ(d.kind, Kind::Denied);
      EXPECT_NE(d.message.find(dbus::polkitAction(method)), std::string::npos) << d.message;
      // The words of the root-only check this replaced come first.
      EXPECT_EQ(
          d.message.rfind(std::string(dbus::methodName(method)) + " changes the running system and needs root", 0), 0U)
          << d.message;
    }
  }
}

TEST(BusAccess, PolkitUnreachableIsSaidWithTheBusError) {
  auto d = dbus::accessFor(dbus::Guarded::Reload,
                           {Answer::Unavailable, "org.freedesktop.DBus.Error.ServiceUnknown: no such name"});
  EXPECT_EQ(d.message,
            "Reload changes the running system and needs root or the polkit authorization org.iommud1.reload, but "
            "polkit is not available (org.freedesktop.DBus.Error.ServiceUnknown: no such name)");
}

TEST(BusAccess, PolkitsAnswerIsReadAuthorizedFirst) {
  EXPECT_EQ(dbus::PolkitClient::answerOf(true, false).kind, Answer::Authorized);
  EXPECT_EQ(dbus::PolkitClient::answerOf(true, true).kind, Answer::Authorized);
  EXPECT_EQ(dbus::PolkitClient::answerOf(false, true).kind, Answer::Challenge);
  EXPECT_EQ(dbus::PolkitClient::answerOf(false, false).kind, Answer::NotAuthorized);
}

TEST(BusAccess, OneUserHoldsAFewOfPolkitsPlacesNotAll) {
  EXPECT_EQ(dbus::polkitQuestionRefused(0, 0), std::nullopt);
  EXPECT_EQ(dbus::polkitQuestionRefused(3, 3), std::nullopt);
  EXPECT_EQ(dbus::polkitQuestionRefused(4, 4),
            "4 calls of this user wait for polkit's answer already (an authentication agent may be asking for a "
            "password); answer or cancel those first");
  // Others' questions do not count against this user, up to the bound in all.
  EXPECT_EQ(dbus::polkitQuestionRefused(dbus::kMaxPolkitQuestions - 1, 0), std::nullopt);
  EXPECT_EQ(dbus::polkitQuestionRefused(dbus::kMaxPolkitQuestions, 0),
            "too many calls wait for polkit's answer; try again later");
  EXPECT_EQ(dbus::kMaxPolkitQuestionsPerUser, 4U);
}

TEST(BusLink, LossIsAWarningAndTheReturnANotice) {
  using LinkKind = dbus::BusLinkEvent::Kind;
  using iommud::adapters::systemd::Priority;
  auto lost = iommud::app::busLinkEntry({LinkKind::Lost, 0, {}, {}});
  EXPECT_EQ(lost.priority, Priority::Warning);
  EXPECT_NE(lost.message.find("the system bus closed iommud's connection"), std::string::npos);
  auto retry = iommud::app::busLinkEntry({LinkKind::Retrying, 3, 800ms, "Connection refused"});
  EXPECT_EQ(retry.priority, Priority::Debug);
  EXPECT_EQ(retry.message, "reconnection 3 to the system bus failed (Connection refused), next in 800 ms");
  auto back = iommud::app::busLinkEntry({LinkKind::Restored, 1, {}, {}});
  EXPECT_EQ(back.priority, Priority::Notice);
  EXPECT_EQ(back.message, "back on the system bus after 1 attempt: org.iommud1 asked for again");
}

}  // namespace bus_link_test
