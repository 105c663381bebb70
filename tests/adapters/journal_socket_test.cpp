// The journal log against libsystemd's real sender, received the way journald receives it.
// sd_journal_sendv always sends to /run/systemd/journal/socket, so the process moves into a mount
// namespace of its own (unshare), puts a tmpfs over /run there and binds a datagram socket at that
// path: nothing on the host changes, and the kernel drops the namespace when the process ends.
// The datagrams are parsed as journald parses the native protocol (systemd's JOURNAL_NATIVE_PROTOCOL
// document). Needs root for the mounts; without it every test FAILS with the reason (CI runs as
// root). Only these: ctest -L journal
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adapters/systemd/log.hpp"
#include "app/change/message_ids.hpp"
#include "support/stderr_capture.hpp"

using iommud::adapters::systemd::Entry;
using iommud::adapters::systemd::Log;
using iommud::adapters::systemd::Priority;
using iommud::testing::capturedStderr;
using Fields = std::vector<std::pair<std::string, std::string>>;

namespace {

constexpr const char* kSocketPath = "/run/systemd/journal/socket";

// Empty when the private /run is in place, else why not.
std::string namespaceError = [] {
  if (::geteuid() != 0) return std::string("needs root: mounts a tmpfs over /run in a private mount namespace");
  if (::unshare(CLONE_NEWNS) != 0) return "unshare(CLONE_NEWNS): " + std::string(std::strerror(errno));
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return "making / private: " + std::string(std::strerror(errno));
  if (::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
    return "mounting a tmpfs on /run: " + std::string(std::strerror(errno));
  if (::mkdir("/run/systemd", 0755) != 0 || ::mkdir("/run/systemd/journal", 0755) != 0)
    return "mkdir /run/systemd/journal: " + std::string(std::strerror(errno));
  return std::string();
}();

// What journald gets from one send: the payload and, for entries too large for a datagram, the
// contents of the memfd passed along with an empty payload.
struct Received {
  std::string payload;
  std::optional<std::string> memfd;
  int seals = 0;
};

class Journald {
 public:
  Journald() {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, kSocketPath, sizeof(addr.sun_path) - 1);
    ::unlink(kSocketPath);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      error_ = "bind " + std::string(kSocketPath) + ": " + std::strerror(errno);
  }
  Journald(const Journald&) = delete;
  Journald& operator=(const Journald&) = delete;
  ~Journald() { stop(); }

  [[nodiscard]] const std::string& error() const { return error_; }

  // Closes the socket but leaves its file: senders then get ECONNREFUSED, as when journald died.
  void stop() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The next datagram, or nullopt when none came within `timeoutMs`.
  std::optional<Received> receive(int timeoutMs = 2000) const {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeoutMs) != 1) return std::nullopt;
    ssize_t size = ::recv(fd_, nullptr, 0, MSG_PEEK | MSG_TRUNC);
    if (size < 0) return std::nullopt;
    Received r;
    r.payload.resize(static_cast<size_t>(size));
    iovec iov{r.payload.data(), r.payload.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC) != size) return std::nullopt;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int fd = 0;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(fd));
      r.seals = ::fcntl(fd, F_GET_SEALS);
      std::string text;
      char buffer[65536];
      ssize_t n = 0;
      off_t at = 0;
      while ((n = ::pread(fd, buffer, sizeof(buffer), at)) > 0) {
        text.append(buffer, static_cast<size_t>(n));
        at += n;
      }
      ::close(fd);
      r.memfd = std::move(text);
    }
    return r;
  }

 private:
  int fd_ = -1;
  std::string error_;
};

// journald's reading of a native protocol entry: "NAME=value\n", or, for values holding a
// newline, "NAME\n", the value's size as 64-bit little endian, the value and "\n".
std::optional<Fields> parseNative(const std::string& data) {
  Fields out;
  size_t at = 0;
  while (at < data.size()) {
    size_t newline = data.find('\n', at);
    if (newline == std::string::npos) return std::nullopt;
    size_t equals = data.find('=', at);
    if (equals != std::string::npos && equals < newline) {
      out.emplace_back(data.substr(at, equals - at), data.substr(equals + 1, newline - equals - 1));
      at = newline + 1;
      continue;
    }
    std::string name = data.substr(at, newline - at);
    at = newline + 1;
    if (data.size() - at < 8) return std::nullopt;
    uint64_t size = 0;
    for (int i = 7; i >= 0; --i) size = (size << 8) | static_cast<unsigned char>(data[at + i]);
    at += 8;
    if (data.size() - at < size + 1 || data[at + size] != '\n') return std::nullopt;
    out.emplace_back(std::move(name), data.substr(at, size));
    at += size + 1;
  }
  return out;
}

class JournalSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(namespaceError, "") << "the journal socket tests cannot run";
    journald_.emplace();
    ASSERT_EQ(journald_->error(), "");
  }

  std::optional<Journald> journald_;
};

Entry weakened() {
  return Entry{Priority::Warning,
               std::string(iommud::app::msgid::kWeakened),
               "0000:3d:00.0: set group 14 type to identity",
               {{"IOMMUD_DEVICE", "0000:3d:00.0"},
                {"IOMMUD_GROUP", "14"},
                {"IOMMUD_FROM", "DMA"},
                {"IOMMUD_TO", "identity"},
                {"iommud_bad", "dropped"}}};
}

}  // namespace

TEST_F(JournalSocket, AnEntryArrivesAsOneDatagramWithItsFieldsInOrder) {
  Log(Log::Target::Journal).write(weakened());
  auto got = journald_->receive();
  ASSERT_TRUE(got.has_value()) << "nothing arrived at " << kSocketPath;
  EXPECT_FALSE(got->memfd.has_value());
  EXPECT_EQ(got->payload,
            "MESSAGE=0000:3d:00.0: set group 14 type to identity\nPRIORITY=4\n"
            "MESSAGE_ID=ec3ed2b1eb094e9da215ec6cd8347600\nSYSLOG_IDENTIFIER=iommud\n"
            "IOMMUD_DEVICE=0000:3d:00.0\nIOMMUD_GROUP=14\nIOMMUD_FROM=DMA\nIOMMUD_TO=identity\n");
  EXPECT_FALSE(journald_->receive(100).has_value()) << "one entry, one datagram";
}

TEST_F(JournalSocket, ValuesWithNewlinesGoLengthPrefixedAndComeBackWhole) {
  Log(Log::Target::Journal)
      .write(Entry{Priority::Err,
                   std::string(iommud::app::msgid::kFailed),
                   "line one\nline two",
                   {{"IOMMUD_FROM", "a=b\n"}, {"IOMMUD_TO", ""}}});
  auto got = journald_->receive();
  ASSERT_TRUE(got.has_value());
  constexpr char kPrefixed[] = "MESSAGE\n\x11\0\0\0\0\0\0\0line one\nline two\n";  // 17 bytes, LE64
  EXPECT_NE(got->payload.find(std::string(kPrefixed, sizeof(kPrefixed) - 1)), std::string::npos);
  auto fields = parseNative(got->payload);
  ASSERT_TRUE(fields.has_value()) << got->payload;
  EXPECT_EQ(*fields, (Fields{{"MESSAGE", "line one\nline two"},
                             {"PRIORITY", "3"},
                             {"MESSAGE_ID", "16d1a84d21544e9fac413193e131fe9d"},
                             {"SYSLOG_IDENTIFIER", "iommud"},
                             {"IOMMUD_FROM", "a=b\n"},
                             {"IOMMUD_TO", ""}}));
}

TEST_F(JournalSocket, AnEntryAboveTheMaximumPrioritySendsNothing) {
  Log log(Log::Target::Journal, Priority::Notice);
  log.info("not sent");
  log.debug("not sent either");
  EXPECT_FALSE(journald_->receive(200).has_value());
  log.notice("sent");
  auto got = journald_->receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->payload, "MESSAGE=sent\nPRIORITY=5\nSYSLOG_IDENTIFIER=iommud\n");
}

TEST_F(JournalSocket, AnEntryTooLargeForADatagramArrivesAsASealedMemfd) {
  // libsystemd raises its send buffer to 8 MiB (the kernel doubles it): 20 MiB cannot be one datagram.
  std::string big(20U << 20U, 'x');
  Log(Log::Target::Journal).write(Entry{Priority::Info, "", big, {{"IOMMUD_KEY", "big"}}});
  auto got = journald_->receive();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->memfd.has_value()) << "a " << got->payload.size() << "-byte datagram came instead";
  EXPECT_EQ(got->payload, "");
  EXPECT_TRUE(got->seals & F_SEAL_WRITE) << "journald accepts only sealed memfds";
  auto fields = parseNative(*got->memfd);
  ASSERT_TRUE(fields.has_value());
  // Compared without printing: a failure would print 20 MiB.
  Fields expected{{"MESSAGE", big}, {"PRIORITY", "6"}, {"SYSLOG_IDENTIFIER", "iommud"}, {"IOMMUD_KEY", "big"}};
  EXPECT_TRUE(*fields == expected) << fields->size() << " fields, the first named " << fields->front().first;
}

TEST_F(JournalSocket, WhenJournaldIsGoneTheEntryGoesToStderr) {
  journald_->stop();  // the socket file stays: sends fail with ECONNREFUSED
  auto text = capturedStderr([](const std::string&) { Log(Log::Target::Journal).write(weakened()); });
  EXPECT_EQ(text, "iommud: warning: 0000:3d:00.0: set group 14 type to identity\n");
}

TEST_F(JournalSocket, WhenJournaldIsGoneButStderrIsItsStreamEachLineCarriesThePriority) {
  journald_->stop();
  auto text = capturedStderr([](const std::string& devIno) {
    ::setenv("JOURNAL_STREAM", devIno.c_str(), 1);
    Log log = Log::fromEnvironment();
    ::unsetenv("JOURNAL_STREAM");
    EXPECT_EQ(log.target(), Log::Target::Journal);
    log.write(Entry{Priority::Err, "", "first\nsecond", {}});
  });
  EXPECT_EQ(text, "<3>first\n<3>second\n");
}

// libsystemd treats a missing socket as "no journal on this system" and drops the entry without
// an error, so Log::fromEnvironment() picks the journal only when journald gave stderr.
TEST_F(JournalSocket, WithoutJournaldsSocketLibsystemdDropsTheEntrySilently) {
  journald_->stop();
  ::unlink(kSocketPath);
  auto text = capturedStderr([](const std::string&) { Log(Log::Target::Journal).warning("lost"); });
  EXPECT_EQ(text, "");
}
