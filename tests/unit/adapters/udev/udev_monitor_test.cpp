// How the udev monitor reads libudev's NULL (docs/kernel.md §12): an overflow is news of its own.
#include <gtest/gtest.h>

#include <cerrno>

#include "adapters/udev/monitor.hpp"

namespace udev_monitor_test {

using iommud::adapters::udev::Received;
using iommud::adapters::udev::receiveErrorKind;

TEST(UdevMonitor, AFullSocketBufferIsAnOverflowNotAnEmptyQueue) {
  EXPECT_EQ(receiveErrorKind(ENOBUFS), Received::Kind::Overflow);
  EXPECT_EQ(receiveErrorKind(EAGAIN), Received::Kind::Drained);
}

TEST(UdevMonitor, AMessageLibudevRefusesIsUnreadable) {
  EXPECT_EQ(receiveErrorKind(EINVAL), Received::Kind::Unreadable);
  EXPECT_EQ(receiveErrorKind(0), Received::Kind::Unreadable);
}

}  // namespace udev_monitor_test
