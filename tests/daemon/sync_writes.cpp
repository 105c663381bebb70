// The umockdev testbed's bind, unbind and type files, written as synchronously as the kernel takes
// them. A preload of the tests (tests/daemon/testbed.py puts it in LD_PRELOAD, before umockdev's),
// never built into a shipped binary.
//
// The kernel binds a device before the write to `bind` returns (docs/kernel.md §2.2); the testbed
// plays the kernel from another process, which sees a write only when its writer closes the file
// (inotify's IN_CLOSE_WRITE). So close(2) of a file the testbed emulates waits here until the
// testbed says it has taken the write: the testbed keeps, per emulated file, a FIFO named by the
// file's device and inode in $IOMMUD_TESTBED_ACKS, and writes one byte to it per write it took.
// Programs under the testbed (iommuctl, iommud, sh) then read the driver link and the type as they
// read them on a real kernel, right after the write, with no settle loop of their own.
//
// With $IOMMUD_TESTBED_UEVENT_OVERFLOW set (testbed.Host(lossy_uevents=True)), it also plays a
// netlink socket's overflow on umockdev's uevent socket (docs/kernel.md §12): the testbed marks a
// uevent it had to drop, because the listener's queue was full, with the file `<socket>-overflow`
// beside the socket umockdev bound (`$UMOCKDEV_DIR/event<fd>`), and the listener's next recvmsg(2)
// fails once with ENOBUFS, before the messages still queued, as the kernel's does.
//
// And rmdir(2) of a tracefs instance (docs/measure.md) under $UMOCKDEV_DIR: umockdev redirects
// mkdir but not rmdir, and the kernel's rmdir takes the instance with its files, so the directory
// the test laid out goes with its files here. The tests then see the instance go as on a host.
#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using CloseFunction = int (*)(int);
using Dup2Function = int (*)(int, int);
using Dup3Function = int (*)(int, int, int);
using RecvmsgFunction = ssize_t (*)(int, struct msghdr*, int);
using RmdirFunction = int (*)(const char*);

CloseFunction nextClose() {
  static auto* next = reinterpret_cast<CloseFunction>(dlsym(RTLD_NEXT, "close"));
  return next;
}

Dup2Function nextDup2() {
  static auto* next = reinterpret_cast<Dup2Function>(dlsym(RTLD_NEXT, "dup2"));
  return next;
}

Dup3Function nextDup3() {
  static auto* next = reinterpret_cast<Dup3Function>(dlsym(RTLD_NEXT, "dup3"));
  return next;
}

RecvmsgFunction nextRecvmsg() {
  static auto* next = reinterpret_cast<RecvmsgFunction>(dlsym(RTLD_NEXT, "recvmsg"));
  return next;
}

RmdirFunction nextRmdir() {
  static auto* next = reinterpret_cast<RmdirFunction>(dlsym(RTLD_NEXT, "rmdir"));
  return next;
}

int removeEntry(const char* path, const struct stat* /*st*/, int type, FTW* /*ftw*/) {
  return ::unlinkat(AT_FDCWD, path, type == FTW_DP ? AT_REMOVEDIR : 0);
}

// Whether the testbed dropped a uevent for the socket `fd` since its last recvmsg(); consumes
// the mark, so that the overflow is reported once.
bool overflowed(int fd) {
  static const bool lossy = std::getenv("IOMMUD_TESTBED_UEVENT_OVERFLOW") != nullptr;
  if (!lossy) return false;
  sockaddr_un address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 || address.sun_family != AF_UNIX ||
      length <= offsetof(sockaddr_un, sun_path) || address.sun_path[0] == '\0') {
    return false;
  }
  const size_t pathLength = ::strnlen(address.sun_path, sizeof address.sun_path);
  const char* slash = std::strrchr(address.sun_path, '/');
  if (pathLength == sizeof address.sun_path || slash == nullptr || std::strncmp(slash + 1, "event", 5) != 0) {
    return false;
  }
  char mark[sizeof address.sun_path + 16];
  std::snprintf(mark, sizeof mark, "%s-overflow", address.sun_path);
  return ::unlink(mark) == 0;
}

// Whether another fd of this process refers to the open file of `fd`: then closing `fd` is not
// the close the testbed sees (a shell's `> file` dups the file onto 1 and closes it at once).
bool sharedWithinProcess(int fd) {
  const pid_t self = ::getpid();
  for (int other = 0; other < 1024; ++other) {
    if (other == fd || ::fcntl(other, F_GETFD) < 0) continue;
    if (::syscall(SYS_kcmp, self, self, KCMP_FILE, fd, other) == 0) return true;
  }
  return false;
}

// Bounds a wait for a testbed that is gone; a living one answers at once.
constexpr int kAckLimitMs = 600 * 1000;

// The acknowledgement FIFO of an fd opened for writing on a file the testbed emulates; false for
// every other fd (no allocation: close may run in a child after fork).
bool ackPathOf(int fd, char* path, size_t size) {
  const char* dir = std::getenv("IOMMUD_TESTBED_ACKS");
  if (dir == nullptr || *dir == '\0') return false;
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode))) return false;
  int n = std::snprintf(path, size, "%s/%llu-%llu", dir, static_cast<unsigned long long>(st.st_dev),
                        static_cast<unsigned long long>(st.st_ino));
  if (n <= 0 || static_cast<size_t>(n) >= size) return false;
  struct stat ack {};
  return ::stat(path, &ack) == 0 && S_ISFIFO(ack.st_mode) && !sharedWithinProcess(fd);
}

void waitForAck(const char* path) {
  int fd = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, kAckLimitMs);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::fprintf(stderr, "sync_writes: the testbed did not take the write acknowledged by %s\n", path);
      break;
    }
    char c = 0;
    ssize_t n = ::read(fd, &c, 1);
    if (n == 1) break;
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    break;
  }
  nextClose()(fd);
}

}  // namespace

// The last reference to a written emulated file goes away by close(2), or by dup2(2)/dup3(2) onto
// its fd (a shell restoring its standard output after `printf ... > /sys/.../bind`).
extern "C" int close(int fd) {
  char path[4096];
  const int saved = errno;
  const bool emulated = ackPathOf(fd, path, sizeof path);
  errno = saved;
  int r = nextClose()(fd);
  if (emulated) {
    const int closeErrno = errno;
    waitForAck(path);
    errno = closeErrno;
  }
  return r;
}

// NOLINTNEXTLINE(readability-inconsistent-declaration-parameter-name): glibc names them __fd, __fd2
extern "C" int dup2(int oldfd, int newfd) {
  char path[4096];
  const int saved = errno;
  const bool emulated = oldfd != newfd && ackPathOf(newfd, path, sizeof path);
  errno = saved;
  int r = nextDup2()(oldfd, newfd);
  if (emulated && r >= 0) {
    const int dupErrno = errno;
    waitForAck(path);
    errno = dupErrno;
  }
  return r;
}

// NOLINTNEXTLINE(readability-inconsistent-declaration-parameter-name)
extern "C" int dup3(int oldfd, int newfd, int flags) {
  char path[4096];
  const int saved = errno;
  const bool emulated = oldfd != newfd && ackPathOf(newfd, path, sizeof path);
  errno = saved;
  int r = nextDup3()(oldfd, newfd, flags);
  if (emulated && r >= 0) {
    const int dupErrno = errno;
    waitForAck(path);
    errno = dupErrno;
  }
  return r;
}

extern "C" ssize_t recvmsg(int fd, struct msghdr* message, int flags) {
  const int saved = errno;
  if (overflowed(fd)) {
    errno = ENOBUFS;
    return -1;
  }
  errno = saved;
  return nextRecvmsg()(fd, message, flags);
}

extern "C" int rmdir(const char* path) {
  static constexpr char kInstances[] = "/sys/kernel/tracing/instances/";
  const char* testbed = std::getenv("UMOCKDEV_DIR");
  if (testbed == nullptr || std::strncmp(path, kInstances, sizeof kInstances - 1) != 0) return nextRmdir()(path);
  char full[4096];
  const int n = std::snprintf(full, sizeof full, "%s%s", testbed, path);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof full) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return ::nftw(full, removeEntry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}
