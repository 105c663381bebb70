#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "adapters/systemd/log.hpp"
#include "app/change/message_ids.hpp"
#include "support/stderr_capture.hpp"

namespace journal_log_test {

using iommud::adapters::systemd::Entry;
using iommud::adapters::systemd::journalFields;
using iommud::adapters::systemd::Log;
using iommud::adapters::systemd::Priority;
using iommud::adapters::systemd::stderrLine;
using iommud::adapters::systemd::validFieldName;
using iommud::adapters::systemd::validMessageId;
using iommud::testing::capturedStderr;
using Strings = std::vector<std::string>;

Entry weakened() {
  return Entry{Priority::Warning,
               std::string(iommud::app::msgid::kWeakened),
               "0000:3d:00.0: set group 14 type to identity",
               {{"IOMMUD_DEVICE", "0000:3d:00.0"}, {"IOMMUD_GROUP", "14"}, {"IOMMUD_TO", "identity"}}};
}

// JOURNAL_STREAM set (or unset) for one scope, restored after it.
class JournalStreamVariable {
 public:
  explicit JournalStreamVariable(const char* value) {
    if (const char* old = std::getenv("JOURNAL_STREAM")) old_ = old;
    if (value != nullptr)
      ::setenv("JOURNAL_STREAM", value, 1);
    else
      ::unsetenv("JOURNAL_STREAM");
  }
  JournalStreamVariable(const JournalStreamVariable&) = delete;
  JournalStreamVariable& operator=(const JournalStreamVariable&) = delete;
  ~JournalStreamVariable() {
    if (old_.empty())
      ::unsetenv("JOURNAL_STREAM");
    else
      ::setenv("JOURNAL_STREAM", old_.c_str(), 1);
  }

 private:
  std::string old_;
};

std::string stderrDevIno() {
  struct stat st {};
  EXPECT_EQ(::fstat(STDERR_FILENO, &st), 0);
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

TEST(JournalFields, ComeInSendOrderWithTheMessageIdAndIdentifier) {
  EXPECT_EQ(journalFields(weakened()),
            (Strings{"MESSAGE=0000:3d:00.0: set group 14 type to identity", "PRIORITY=4",
                     "MESSAGE_ID=ec3ed2b1eb094e9da215ec6cd8347600", "SYSLOG_IDENTIFIER=iommud",
                     "IOMMUD_DEVICE=0000:3d:00.0", "IOMMUD_GROUP=14", "IOMMUD_TO=identity"}));
}

TEST(JournalFields, LeaveOutAnEmptyMessageId) {
  EXPECT_EQ(journalFields(Entry{Priority::Debug, "", "probe done", {}}),
            (Strings{"MESSAGE=probe done", "PRIORITY=7", "SYSLOG_IDENTIFIER=iommud"}));
}

TEST(JournalFields, DropAMessageIdThatIsNotThirtyTwoLowercaseHexDigits) {
  for (const char* id :
       {"EC3ED2B1EB094E9DA215EC6CD8347600", "ec3ed2b1-eb09-4e9d-a215-ec6cd8347600", "ec3ed2b1eb094e9da215ec6cd834760",
        "ec3ed2b1eb094e9da215ec6cd83476000", "ec3ed2b1eb094e9da215ec6cd834760g"}) {
    auto fields = journalFields(Entry{Priority::Info, id, "m", {}});
    EXPECT_EQ(fields, (Strings{"MESSAGE=m", "PRIORITY=6", "SYSLOG_IDENTIFIER=iommud"})) << id;
  }
}

TEST(JournalFields, DropFieldsWithInvalidNamesAndKeepTheRest) {
  Entry e{Priority::Notice,
          "",
          "m",
          {{"", "empty"},
           {"_PID", "1"},
           {"iommud_device", "lower"},
           {"1FIELD", "digit first"},
           {"IOMMUD-DEVICE", "dash"},
           {"IOMMUD DEVICE", "space"},
           {std::string(65, 'A'), "too long"},
           {std::string(64, 'A'), "longest"},
           {"IOMMUD_KEY", "rx"},
           {"A1_", "short"}}};
  EXPECT_EQ(journalFields(e), (Strings{"MESSAGE=m", "PRIORITY=5", "SYSLOG_IDENTIFIER=iommud",
                                       std::string(64, 'A') + "=longest", "IOMMUD_KEY=rx", "A1_=short"}));
}

TEST(JournalFields, DoNotLetAnEntryFieldReplaceTheirOwn) {
  Entry e{Priority::Info,
          "",
          "real",
          {{"MESSAGE", "fake"}, {"PRIORITY", "0"}, {"MESSAGE_ID", "0"}, {"SYSLOG_IDENTIFIER", "x"}}};
  EXPECT_EQ(journalFields(e), (Strings{"MESSAGE=real", "PRIORITY=6", "SYSLOG_IDENTIFIER=iommud"}));
}

TEST(JournalFields, KeepNewlinesAndEmptyValuesAsTheyAre) {
  Entry e{Priority::Err, "", "line one\nline two", {{"IOMMUD_FROM", "a\nb"}, {"IOMMUD_TO", ""}}};
  EXPECT_EQ(journalFields(e), (Strings{"MESSAGE=line one\nline two", "PRIORITY=3", "SYSLOG_IDENTIFIER=iommud",
                                       "IOMMUD_FROM=a\nb", "IOMMUD_TO="}));
}

TEST(FieldNames, FollowJournaldsRules) {
  EXPECT_TRUE(validFieldName("IOMMUD_DEVICE"));
  EXPECT_TRUE(validFieldName("X"));
  EXPECT_FALSE(validFieldName("_X"));
  EXPECT_FALSE(validFieldName("9X"));
  EXPECT_FALSE(validFieldName("Xé"));
  EXPECT_TRUE(validMessageId(iommud::app::msgid::kStarted));
  EXPECT_FALSE(validMessageId(""));
}

TEST(StderrLine, NamesTheProgramAndTheLevelInWords) {
  EXPECT_EQ(stderrLine(weakened()), "iommud: warning: 0000:3d:00.0: set group 14 type to identity");
  EXPECT_EQ(stderrLine(Entry{Priority::Err, "", "x", {}}), "iommud: error: x");
  EXPECT_EQ(stderrLine(Entry{Priority::Notice, "", "x", {}}), "iommud: notice: x");
  EXPECT_EQ(stderrLine(Entry{Priority::Info, "", "x", {}}), "iommud: info: x");
  EXPECT_EQ(stderrLine(Entry{Priority::Debug, "", "x", {}}), "iommud: debug: x");
}

TEST(StderrLine, LeavesFieldsToTheJournal) {
  EXPECT_EQ(stderrLine(Entry{Priority::Info, std::string(iommud::app::msgid::kStarted), "ready", {{"A", "b"}}}),
            "iommud: info: ready");
}

TEST(JournalLog, WritesEntriesUpToItsMaximumPriority) {
  Log log(Log::Target::Stderr);
  EXPECT_EQ(log.maxPriority(), Priority::Info);
  auto text = capturedStderr([&](const std::string&) {
    log.debug("hidden");
    log.info("shown");
    log.notice("n");
    log.warning("w");
    log.error("e");
  });
  EXPECT_EQ(text, "iommud: info: shown\niommud: notice: n\niommud: warning: w\niommud: error: e\n");
}

TEST(JournalLog, DropsEverythingBelowAWarningWhenAskedTo) {
  Log log(Log::Target::Stderr, Priority::Debug);
  log.setMaxPriority(Priority::Warning);
  EXPECT_EQ(log.maxPriority(), Priority::Warning);
  auto text = capturedStderr([&](const std::string&) {
    log.write(Entry{Priority::Notice, "", "n", {}});
    log.write(weakened());
    log.error("e");
  });
  EXPECT_EQ(text, "iommud: warning: 0000:3d:00.0: set group 14 type to identity\niommud: error: e\n");
}

TEST(JournalLog, WritesDebugWhenItsMaximumIsDebug) {
  Log log(Log::Target::Stderr, Priority::Debug);
  EXPECT_EQ(capturedStderr([&](const std::string&) { log.debug("d"); }), "iommud: debug: d\n");
}

TEST(JournalLog, ChoosesTheJournalOnlyWhenJournalStreamNamesStderr) {
  {
    JournalStreamVariable v(nullptr);
    EXPECT_EQ(Log::fromEnvironment().target(), Log::Target::Stderr);
  }
  {
    JournalStreamVariable v(stderrDevIno().c_str());
    EXPECT_EQ(Log::fromEnvironment().target(), Log::Target::Journal);
  }
  {
    // stderr redirected (e.g. `iommud 2>file` in a unit's shell): the variable is inherited but
    // names another stream.
    std::string other = stderrDevIno() + "1";
    JournalStreamVariable v(other.c_str());
    EXPECT_EQ(Log::fromEnvironment().target(), Log::Target::Stderr);
  }
  for (const char* bad : {"", ":", "12", "12:", ":34", "a:b", "1:2:3", " 1:2"}) {
    JournalStreamVariable v(bad);
    EXPECT_EQ(Log::fromEnvironment().target(), Log::Target::Stderr) << bad;
  }
}

TEST(KmsgLine, IsOneRecordWithThePriorityAndTheName) {
  using iommud::adapters::systemd::kmsgLine;
  EXPECT_EQ(kmsgLine(weakened()), "<4>iommud: 0000:3d:00.0: set group 14 type to identity\n");
  EXPECT_EQ(kmsgLine(Entry{Priority::Err, "", "a\nb\tc", {}}), "<3>iommud: a b c\n");
  EXPECT_EQ(kmsgLine(Entry{Priority::Debug, "", "x", {}}), "<7>iommud: x\n");
}

TEST(KmsgLine, FitsTheKernelsLimitWithoutCuttingACharacter) {
  using iommud::adapters::systemd::kmsgLine;
  std::string euros;
  for (int i = 0; i < 2000; ++i) euros += "\xe2\x82\xac";  // U+20AC, three bytes
  auto line = kmsgLine(Entry{Priority::Info, "", euros, {}});
  EXPECT_LE(line.size(), 992U);
  EXPECT_EQ(line.back(), '\n');
  std::string body = line.substr(std::string("<6>iommud: ").size());
  body.pop_back();
  EXPECT_EQ(body.size() % 3, 0U);
  EXPECT_EQ(body.substr(0, 3), "\xe2\x82\xac");
}

TEST(JournalLog, AtEarlyBootPrefersTheJournalThenTheKernelsLog) {
  {
    JournalStreamVariable v(stderrDevIno().c_str());
    EXPECT_EQ(Log::forEarlyBoot().target(), Log::Target::Journal);
  }
  JournalStreamVariable v(nullptr);
  EXPECT_EQ(Log::forEarlyBoot().target(), ::access("/dev/kmsg", W_OK) == 0 ? Log::Target::Kmsg : Log::Target::Stderr);
}

}  // namespace journal_log_test
