// The udev monitor adapter against the running kernel and Debian's libudev: in a network namespace
// of its own (uevent netlink sockets are per namespace, so no host event reaches it and none of its
// messages leaves it), a sender plays udevd, broadcasting udev-format messages to group 2, and the
// monitor's receive buffer is shrunk through its fd so that a burst overflows it
// (docs/kernel.md §12). Needs root (the namespace, and libudev takes only messages from uid 0).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "adapters/udev/monitor.hpp"

namespace ud = iommud::adapters::udev;
using Kind = ud::Received::Kind;

namespace {

// systemd's string_hash32(): MurmurHash2 seeded with the length, which libudev's socket filter
// compares with the header's subsystem hash.
uint32_t murmur2(const std::string& text) {
  constexpr uint32_t kM = 0x5BD1E995;
  auto h = static_cast<uint32_t>(text.size());
  size_t i = 0;
  for (; i + 4 <= text.size(); i += 4) {
    uint32_t k = 0;
    std::memcpy(&k, text.data() + i, 4);  // little endian, as the tests run on x86
    k *= kM;
    k ^= k >> 24;
    k *= kM;
    h = (h * kM) ^ k;
  }
  const auto* tail = reinterpret_cast<const unsigned char*>(text.data() + i);
  switch (text.size() - i) {
    case 3: h ^= static_cast<uint32_t>(tail[2]) << 16; [[fallthrough]];
    case 2: h ^= static_cast<uint32_t>(tail[1]) << 8; [[fallthrough]];
    case 1:
      h ^= tail[0];
      h *= kM;
      break;
    default: break;
  }
  h ^= h >> 13;
  h *= kM;
  h ^= h >> 15;
  return h;
}

// One uevent as udevd relays it to libudev listeners: the libudev header, then the properties.
std::vector<char> udevMessage(int seqnum) {
  const std::string address = "0000:72:00." + std::to_string(seqnum % 8);
  std::string body;
  for (const std::string& p :
       std::vector<std::string>{"ACTION=add", "DEVPATH=/devices/pci0000:00/" + address, std::string("SUBSYSTEM=pci"),
                                "SEQNUM=" + std::to_string(seqnum), "PCI_SLOT_NAME=" + address}) {
    body += p;
    body.push_back('\0');
  }
  struct Header {
    char prefix[8];
    uint32_t magic, headerSize, propertiesOff, propertiesLen, subsystemHash, devtypeHash, bloomHi, bloomLo;
  } h{"libudev",
      htonl(0xFEEDCAFE),
      sizeof(Header),
      sizeof(Header),
      static_cast<uint32_t>(body.size()),
      htonl(murmur2("pci")),
      0,
      0,
      0};
  std::vector<char> out(sizeof h + body.size());
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, body.data(), body.size());
  return out;
}

// Leaves the host's network namespace once per process; empty when all went well, else why not.
std::string enterNamespace() {
  if (geteuid() != 0) {
    return "the udev monitor netns tests need root (a network namespace; libudev takes messages from uid 0 only); "
           "run them as root, as CI does: ctest -L netns";
  }
  if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  return "";
}

const std::string& namespaceProblem() {
  static const std::string problem = enterNamespace();
  return problem;
}

class UdevMonitorNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(namespaceProblem(), "");
    auto m = ud::Monitor::open({"pci"});
    ASSERT_TRUE(m.ok()) << m.error().describe();
    monitor_.emplace(std::move(*m));
    sender_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
    ASSERT_GE(sender_, 0) << std::strerror(errno);
    sockaddr_nl self{};
    self.nl_family = AF_NETLINK;
    ASSERT_EQ(bind(sender_, reinterpret_cast<sockaddr*>(&self), sizeof self), 0) << std::strerror(errno);
  }
  void TearDown() override {
    if (sender_ >= 0) close(sender_);
  }

  // Broadcasts `n` messages to the "udev" group, as udevd does; the sender never hears of a drop.
  void send(int n) const {
    sockaddr_nl group{};
    group.nl_family = AF_NETLINK;
    group.nl_groups = 2;
    for (int i = 1; i <= n; ++i) {
      auto m = udevMessage(i);
      ASSERT_EQ(sendto(sender_, m.data(), m.size(), 0, reinterpret_cast<sockaddr*>(&group), sizeof group),
                static_cast<ssize_t>(m.size()))
          << std::strerror(errno);
    }
  }

  // Every receive until the queue is drained (bounded: a broken adapter must not loop forever).
  std::vector<ud::Received> drain() {
    std::vector<ud::Received> out;
    for (int i = 0; i < 10000; ++i) {
      out.push_back(monitor_->receive());
      if (out.back().kind == Kind::Drained) break;
    }
    return out;
  }

  std::optional<ud::Monitor> monitor_;
  int sender_ = -1;
};

}  // namespace

TEST_F(UdevMonitorNetns, EventsWithinTheBufferAreReceivedInOrderThenTheQueueIsDrained) {
  send(3);
  auto got = drain();
  ASSERT_EQ(got.size(), 4U) << "the monitor heard nothing: is /dev a devtmpfs (libudev's test for a running udev)?";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].kind, Kind::Event);
    EXPECT_EQ(got[i].event.action, "add");
    EXPECT_EQ(got[i].event.subsystem, "pci");
    EXPECT_EQ(got[i].event.devpath, "/devices/pci0000:00/0000:72:00." + std::to_string((i + 1) % 8));
  }
  EXPECT_EQ(got[3].kind, Kind::Drained);
}

TEST_F(UdevMonitorNetns, ABurstLargerThanTheBufferIsReportedAsOneOverflowBeforeWhatWasQueued) {
  // The smallest buffer the kernel allows (SO_RCVBUF 0 becomes its minimum), set on the open
  // monitor's fd: the product asks for 16 MiB, a test makes it small from outside.
  int zero = 0;
  ASSERT_EQ(setsockopt(monitor_->fd(), SOL_SOCKET, SO_RCVBUF, &zero, sizeof zero), 0) << std::strerror(errno);
  constexpr int kSent = 100;
  send(kSent);
  auto got = drain();
  ASSERT_GE(got.size(), 2U);
  EXPECT_EQ(got.front().kind, Kind::Overflow);
  EXPECT_EQ(got.front().error, ENOBUFS);
  size_t events = 0;
  for (size_t i = 1; i + 1 < got.size(); ++i) {
    EXPECT_EQ(got[i].kind, Kind::Event) << "at " << i;
    ++events;
  }
  EXPECT_GT(events, 0U) << "what was queued before the drop follows the overflow";
  EXPECT_LT(events, static_cast<size_t>(kSent)) << "nothing was lost: the buffer was not small";
  EXPECT_EQ(got.back().kind, Kind::Drained);
  // Once: the next burst that fits is plain events again.
  send(1);
  auto after = drain();
  ASSERT_EQ(after.size(), 2U);
  EXPECT_EQ(after[0].kind, Kind::Event);
}
