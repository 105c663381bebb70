// The hotplug watch's own descriptor: a forked worker closes its copy through the watch.
#include "app/daemon/hotplug_watch.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

namespace hotplug_watch_test {

namespace app = iommud::app;
namespace sd = iommud::adapters::systemd;
using namespace std::chrono_literals;

size_t openDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(HotplugWatch, CloseInChildClosesTheMonitor) {
  sd::EventLoop loop = sd::EventLoop::create().value();
  const sd::Log log{sd::Log::Target::Stderr};
  const iommud::adapters::sysfs::Root root;
  app::HotplugFilter filter{1ms};
  app::HotplugWatch watch(root, filter, log, {});
  const size_t before = openDescriptors();
  ASSERT_TRUE(watch.start(loop));
  const size_t started = openDescriptors();
  ASSERT_GT(started, before);  // the monitor's socket (and the debounce timer's, in the loop)
  watch.closeInChild();
  EXPECT_EQ(openDescriptors(), started - 1);  // the socket, through its owner
}

}  // namespace hotplug_watch_test
