#include "support/unique_fd.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <initializer_list>
#include <string>
#include <utility>

#include "support/whole_file.hpp"

namespace iommud::unique_fd_test {

using support::OverLimit;
using support::UniqueFd;

bool isOpen(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

// A pipe holding `text`, its write end closed: what a read to the end sees.
UniqueFd pipeWith(const std::string& text) {
  std::array<int, 2> fds{-1, -1};
  EXPECT_EQ(::pipe2(fds.data(), O_CLOEXEC), 0);
  UniqueFd in(fds[0]);
  UniqueFd out(fds[1]);
  EXPECT_EQ(::write(out.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return in;
}

TEST(UniqueFd, ClosesWhatItHoldsWhenItGoes) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    const UniqueFd fd(raw);
    EXPECT_TRUE(fd);
    EXPECT_EQ(fd.get(), raw);
  }
  EXPECT_FALSE(isOpen(raw));
}

TEST(UniqueFd, AMoveHandsTheDescriptorOnAndAnAssignmentClosesTheOldOne) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd b(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int first = a.get();
  const int second = b.get();
  b = std::move(a);
  EXPECT_FALSE(isOpen(second));
  EXPECT_EQ(b.get(), first);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): a moved-from owner holds nothing
  UniqueFd c(std::move(b));
  EXPECT_EQ(c.get(), first);
  EXPECT_TRUE(isOpen(first));
}

TEST(UniqueFd, ReleaseGivesUpAndResetCloses) {
  UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = fd.release();
  EXPECT_FALSE(fd);
  EXPECT_TRUE(isOpen(raw));
  fd.reset(raw);
  EXPECT_EQ(fd.get(), raw);
  fd.reset();
  EXPECT_FALSE(fd);
  EXPECT_FALSE(isOpen(raw));
}

TEST(UniqueFd, CloseSaysWhatCloseSaid) {
  UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = fd.get();
  EXPECT_EQ(fd.close(), 0);
  EXPECT_FALSE(fd);
  EXPECT_FALSE(isOpen(raw));
  EXPECT_EQ(fd.close(), 0);  // nothing held: nothing to say
}

TEST(ReadWhole, ReadsToTheEnd) {
  const std::string text(60000, 'x');  // a pipe holds 64 KiB: the writer never blocks
  auto got = support::readWhole(pipeWith(text).get(), "p");
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, text);
}

TEST(ReadWhole, RefusesMoreThanItsLimit) {
  auto got = support::readWhole(pipeWith("0123456789").get(), "p", {.bytes = 4});
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, EFBIG);
  EXPECT_EQ(got.error().describe(), "p: more than 4 bytes: refused");
  EXPECT_TRUE(support::readWhole(pipeWith("0123").get(), "p", {.bytes = 4}));
}

TEST(ReadWhole, StopsPastItsLimitWhenAskedTo) {
  auto got = support::readWhole(pipeWith("0123456789").get(), "p", {.bytes = 4, .over = OverLimit::Stop});
  ASSERT_TRUE(got);
  EXPECT_GT(got->size(), 4U);  // the caller sees it is too long
}

// A socket whose reads return `pieces` one at a time, as kernfs hands a binary attribute over a
// page per read.
UniqueFd readsOf(std::initializer_list<size_t> pieces) {
  std::array<int, 2> fds{-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds.data()), 0);
  UniqueFd in(fds[0]);
  const UniqueFd out(fds[1]);
  for (size_t n : pieces) {
    const std::string piece(n, 'x');
    EXPECT_EQ(::send(out.get(), piece.data(), piece.size(), 0), static_cast<ssize_t>(n));
  }
  return in;
}

TEST(ReadWhole, OneReadStopsAtAReadShorterThanAPage) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto got = support::readWhole(readsOf({page - 1, 10}).get(), "p", {.oneRead = true});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size(), page - 1);  // a sysfs attribute: its next read would say 0
}

TEST(ReadWhole, OneReadGoesOnAfterAWholePage) {
  // A binary attribute longer than a page (an ACPI table of 10 KiB): a read of a whole page is not
  // its end, though it is shorter than the buffer.
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto got = support::readWhole(readsOf({page, page, 100}).get(), "p", {.oneRead = true});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size(), 2 * page + 100);
}

TEST(ReadWhole, SaysTheErrorOfTheRead) {
  const UniqueFd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto got = support::readWhole(dir.get(), "/");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, EISDIR);
}

}  // namespace iommud::unique_fd_test
