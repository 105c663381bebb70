#include "adapters/initramfs/initramfs_reader.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <optional>
#include <tuple>
#include <utility>

#include "adapters/sysfs/contained_read.hpp"
#include "core/initramfs.hpp"
#include "core/text.hpp"

namespace iommud::adapters::initramfs {

namespace {

using core::Error;
using core::Result;
using Clock = std::chrono::steady_clock;
using support::UniqueFd;

Result<std::pair<UniqueFd, UniqueFd>> makePipe() {
  std::array<int, 2> fds{-1, -1};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) return core::errnoError(errno, "pipe");
  return std::pair<UniqueFd, UniqueFd>(std::piecewise_construct, std::forward_as_tuple(fds[0]),
                                       std::forward_as_tuple(fds[1]));
}

// The spawned lister: its own process group, so that a timeout kills the decompressors and cpio
// it runs too, and default signal handling (a parent ignoring SIGPIPE would pass that on).
struct Spawned {
  pid_t pid = -1;
  int error = 0;  // posix_spawnp's: ENOENT when the program is not in PATH
};

Spawned spawn(const std::string& program, const std::string& image, int out, int err) {
  Spawned s;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err, STDERR_FILENO);
  sigset_t none;
  sigset_t defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string arg0 = program;
  std::string arg1 = image;
  std::array<char*, 3> argv{arg0.data(), arg1.data(), nullptr};
  s.error = ::posix_spawnp(&s.pid, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return s;
}

int waitFor(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The last non-empty line of a tool's stderr: where its reason is.
std::string lastLine(std::string_view text) {
  auto lines = core::split(core::trim(text), '\n');
  std::string_view last = core::trim(lines.back());
  constexpr size_t kMax = 200;
  return std::string(last.substr(0, kMax));
}

// What a lister printed: all of stdout, the end of stderr.
struct Printed {
  std::string out;
  std::string err;
};

constexpr size_t kErrKeep = 4096;  // of stderr: its end, where the reason is

// One read from a ready stream into `into`; its end (or an error, which ends it all the same)
// takes it out of the poll.
void readSome(pollfd& p, std::array<char, 65536>& buf, std::string& into) {
  ssize_t got = ::read(p.fd, buf.data(), buf.size());
  if (got < 0 && errno == EINTR) return;
  if (got <= 0) {
    p.fd = -1;
    return;
  }
  into.append(buf.data(), static_cast<size_t>(got));
}

// Reads the lister's stdout and stderr until both end; an error when the time or the size
// allowed runs out first.
std::optional<Error> collect(const UniqueFd& outRead, const UniqueFd& errRead, const std::string& program,
                             const std::string& image, const ListOptions& options, Printed& printed) {
  const auto deadline = Clock::now() + options.timeout;
  std::array<pollfd, 2> fds{pollfd{outRead.get(), POLLIN, 0}, pollfd{errRead.get(), POLLIN, 0}};
  std::array<char, 65536> buf{};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      const auto ms = options.timeout.count();
      return Error{ETIMEDOUT, image,
                   program + " did not finish within " +
                       (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms")};
    }
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(left));
    if (n < 0 && errno != EINTR) return core::errnoError(errno, "poll");
    for (size_t i = 0; i < fds.size() && n > 0; ++i) {
      if (fds[i].fd >= 0 && fds[i].revents != 0) readSome(fds[i], buf, i == 0 ? printed.out : printed.err);
    }
    if (printed.err.size() > 2 * kErrKeep) printed.err.erase(0, printed.err.size() - kErrKeep);
    if (printed.out.size() > options.maxOutput) {
      return Error{EFBIG, image, program + " printed more than " + std::to_string(options.maxOutput >> 20U) + " MiB"};
    }
  }
  return std::nullopt;
}

// Runs `program IMAGE` and collects its stdout; `notFound` when the program is not in PATH.
Result<std::string> run(const std::string& program, const std::string& arg, const std::string& image,
                        const ListOptions& options, bool& notFound) {
  auto outPipe = makePipe();
  if (!outPipe) return outPipe.error();
  auto errPipe = makePipe();
  if (!errPipe) return errPipe.error();
  auto& [outRead, outWrite] = *outPipe;
  auto& [errRead, errWrite] = *errPipe;
  Spawned child = spawn(program, arg, outWrite.get(), errWrite.get());
  outWrite.reset();
  errWrite.reset();
  if (child.error == ENOENT) {
    notFound = true;
    return core::errnoError(ENOENT, program);
  }
  if (child.error != 0) return core::errnoError(child.error, program);

  Printed printed;
  if (auto failure = collect(outRead, errRead, program, image, options, printed)) {
    ::kill(-child.pid, SIGKILL);
    waitFor(child.pid);
    return *failure;
  }
  const int status = waitFor(child.pid);
  if (WIFSIGNALED(status)) {
    return Error{0, image, program + " was killed by signal " + std::to_string(WTERMSIG(status))};
  }
  if (WEXITSTATUS(status) != 0) {
    std::string why = core::trim(printed.err).empty() ? "" : ": " + lastLine(printed.err);
    return Error{0, image, program + " exited with status " + std::to_string(WEXITSTATUS(status)) + why};
  }
  return std::move(printed.out);
}

// Runs the listers in turn on `arg`, the image called `image` in what is said.
Result<std::string> listAs(const std::string& arg, const std::string& image, const ListOptions& options) {
  std::string tried;
  for (const auto& program : options.listers) {
    bool notFound = false;
    auto listed = run(program, arg, image, options, notFound);
    if (!notFound) return listed;
    tried += (tried.empty() ? "" : " or ") + program;
  }
  return Error{ENOENT, image, "cannot list it: " + tried + " is not installed"};
}

// The image opened inside the root, as every read under --root is (a link in a captured tree never
// leads out of it), and handed to the lister as /proc/PID/fd/N: the file opened, not a path that
// the lister would resolve again from the host's root.
Result<std::string> listInRoot(const sysfs::Root& root, const std::string& image, const ListOptions& options) {
  const std::string name = root.hostPath(image);
  auto fd = root.openFile(image);
  if (!fd) return Error{fd.error().code, name, fd.error().message};
  if (auto regular = sysfs::checkRegular(fd->get(), name); !regular) return regular.error();
  return listAs("/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd->get()), name, options);
}

}  // namespace

Result<std::string> listImage(const std::string& path, const ListOptions& options) {
  // Opening it first gives the plain reason (a 0600 image read by a user) instead of the lister's.
  // Not regular (a FIFO, a device under --root): refused before a lister reads it without end.
  {
    UniqueFd fd(::open(path.c_str(), sysfs::kReadFlags));
    if (fd.get() < 0) return core::errnoError(errno, path);
    if (auto regular = sysfs::checkRegular(fd.get(), path); !regular) return regular.error();
  }
  return listAs(path, path, options);
}

core::Initramfs readInitramfs(const sysfs::Root& root, const std::string& release, const ListOptions& options) {
  core::Initramfs out;
  out.state = core::Initramfs::State::Absent;
  if (release.empty()) return out;
  using Generator = core::Initramfs::Generator;
  for (const auto& [image, generator] : {std::pair{"/boot/initrd.img-" + release, Generator::UpdateInitramfs},
                                         std::pair{"/boot/initramfs-" + release + ".img", Generator::Dracut}}) {
    auto mode = root.fileMode(image);
    if (!mode && mode.error().code == ENOENT) continue;
    out.image = image;
    out.generator = generator;
    auto listed = mode ? listInRoot(root, image, options) : Result<std::string>(mode.error());
    if (!listed) {
      out.state = core::Initramfs::State::Unreadable;
      // The path is the image, which the note names already.
      out.reason = listed.error().message;
      return out;
    }
    auto parsed = core::parseInitramfsListing(*listed, release);
    if (parsed.entries == 0) {
      out.state = core::Initramfs::State::Unreadable;
      out.reason = "its listing is empty";
      return out;
    }
    out.state = core::Initramfs::State::Listed;
    out.modules = std::move(parsed.modules);
    return out;
  }
  return out;
}

}  // namespace iommud::adapters::initramfs
