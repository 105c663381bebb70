// sd_notify through the adapter, to a datagram socket of the test's own as $NOTIFY_SOCKET: what a
// service manager receives.
#include "adapters/systemd/notify.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace notify_test {

namespace sd = iommud::adapters::systemd;

TEST(Notify, SendsTheStateToNotifySocketAndNothingWithoutOne) {
  char dir[] = "/tmp/iommud-notify-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/notify";
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(s, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const char* was = std::getenv("NOTIFY_SOCKET");
  const std::string saved = was != nullptr ? was : "";
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  sd::notify("READY=1\nSTATUS=3 devices tuned");
  char buf[256] = {};
  ssize_t n = recv(s, buf, sizeof buf - 1, 0);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "READY=1\nSTATUS=3 devices tuned");
  unsetenv("NOTIFY_SOCKET");
  sd::notify("STOPPING=1");
  EXPECT_EQ(recv(s, buf, sizeof buf, 0), -1);  // nothing sent: no socket named
  if (was != nullptr) setenv("NOTIFY_SOCKET", saved.c_str(), 1);
  close(s);
  std::filesystem::remove_all(dir);
}

}  // namespace notify_test
