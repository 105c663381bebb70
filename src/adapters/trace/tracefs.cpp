#include "adapters/trace/tracefs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>

#include "adapters/sysfs/writer.hpp"
#include "core/text.hpp"
#include "support/unique_fd.hpp"
#include "support/whole_file.hpp"

namespace iommud::adapters::trace {

using core::Done;
using core::errnoError;
using core::Error;

namespace {

constexpr std::string_view kPrefix = "iommud-";

std::optional<uint64_t> number(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string eventDir(std::string_view instance, const core::DmaEventSpec& spec, std::string_view name) {
  return std::string(instance) + "/events/" + std::string(spec.system) + "/" + std::string(name);
}

bool exists(const sysfs::Root& root, const std::string& path) {
  struct stat st {};
  return ::stat(root.hostPath(path).c_str(), &st) == 0;
}

}  // namespace

std::string instanceName(const InstanceOwner& owner) {
  return std::string(kPrefix) + std::to_string(owner.pid) + "-" + std::to_string(owner.start);
}

std::optional<InstanceOwner> parseInstanceName(std::string_view name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  auto dash = name.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto pid = number(name.substr(0, dash));
  auto start = number(name.substr(dash + 1));
  if (!pid || !start || *pid == 0 || *pid > 0x3fffffff) return std::nullopt;
  return InstanceOwner{static_cast<int>(*pid), *start};
}

std::optional<uint64_t> parseStartTime(std::string_view statText) {
  // "pid (comm) state ppid ...": the comm ends at the last ')'; starttime is field 22, the 20th
  // after it (proc(5)).
  auto close = statText.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  auto fields = core::words(statText.substr(close + 1));
  if (fields.size() < 20) return std::nullopt;
  return number(fields[19]);
}

Result<InstanceOwner> thisProcess(const sysfs::Root& root) {
  auto stat = root.readFile("/proc/self/stat");
  if (!stat) return stat.error();
  auto start = parseStartTime(*stat);
  if (!start) return Error{EINVAL, "/proc/self/stat", "no start time in it"};
  return InstanceOwner{static_cast<int>(::getpid()), *start};
}

bool isAlive(const sysfs::Root& root, const InstanceOwner& owner) {
  auto stat = root.readFile("/proc/" + std::to_string(owner.pid) + "/stat");
  if (!stat) return stat.error().code != ENOENT && stat.error().code != ESRCH;  // unreadable: assume alive
  auto start = parseStartTime(*stat);
  return start && *start == owner.start;
}

Result<std::string> findTracefs(const sysfs::Root& root) {
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    std::string instances = std::string(dir) + "/instances";
    struct stat st {};
    if (::stat(root.hostPath(instances).c_str(), &st) == 0) return std::string(dir);
    // tracefs is root's (mode 0700): someone else cannot even look.
    if (errno == EACCES || errno == EPERM) return errnoError(errno, instances);
  }
  // /sys/kernel/tracing exists (empty) when tracefs is built in but not mounted.
  return Error{ENOENT, "/sys/kernel/tracing",
               "tracefs is not mounted (mount it with: mount -t tracefs tracefs /sys/kernel/tracing)"};
}

Result<std::string> readAll(const sysfs::Root& root, std::string_view path) {
  const support::UniqueFd fd(::open(root.hostPath(path).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errnoError(errno, std::string(path));
  return support::readWhole(fd.get(), std::string(path));
}

Result<Done> removeInstance(const sysfs::Root& root, const std::string& instance) {
  std::string full = root.hostPath(instance);
  if (::rmdir(full.c_str()) == 0 || errno == ENOENT) return Done{};
  if (errno != EBUSY) return errnoError(errno, instance);
  // Busy: a file of it is open somewhere. Take the triggers away so that it counts nothing more,
  // then try once more.
  sysfs::RootWriter writer(root);
  for (const core::DmaEventSpec& spec : core::dmaEventSpecs()) {
    for (std::string_view name : spec.names()) {
      std::string trigger = eventDir(instance, spec, name) + "/trigger";
      // Best effort: the rmdir that follows says whether the instance could go.
      if (exists(root, trigger)) (void)writer.write(trigger, "!" + spec.trigger());
    }
  }
  if (::rmdir(full.c_str()) == 0 || errno == ENOENT) return Done{};
  return errnoError(errno, instance);
}

Sweep removeStaleInstances(const sysfs::Root& root, std::string_view tracefs) {
  Sweep sweep;
  std::string dir = std::string(tracefs) + "/instances";
  auto names = root.listDir(dir);
  if (!names) {
    sweep.failures.push_back(names.error());
    return sweep;
  }
  for (const std::string& name : *names) {
    auto owner = parseInstanceName(name);
    if (!owner || isAlive(root, *owner)) continue;
    auto removed = removeInstance(root, dir + "/" + name);
    if (removed) {
      sweep.removed.push_back(name);
    } else {
      sweep.failures.push_back(removed.error());
    }
  }
  return sweep;
}

DmaCounters::DmaCounters(const sysfs::Root& root, std::string instance)
    : root_(&root), instance_(std::move(instance)) {}

DmaCounters::DmaCounters(DmaCounters&& other) noexcept
    : root_(other.root_),
      instance_(std::move(other.instance_)),
      armed_(std::move(other.armed_)),
      absent_(std::move(other.absent_)),
      sweep_(std::move(other.sweep_)) {
  other.instance_.clear();
}

DmaCounters::~DmaCounters() {
  // A destructor has no one to tell; the owner that cares calls close() and reads its result.
  (void)close();
}

Result<Done> DmaCounters::close() {
  if (instance_.empty()) return Done{};
  auto r = removeInstance(*root_, instance_);
  if (r) instance_.clear();
  return r;
}

Result<DmaCounters> DmaCounters::open(const sysfs::Root& root) {
  auto tracefs = findTracefs(root);
  if (!tracefs) return tracefs.error();
  auto self = thisProcess(root);
  if (!self) return self.error();
  Sweep sweep = removeStaleInstances(root, *tracefs);

  std::string instance = *tracefs + "/instances/" + instanceName(*self);
  if (::mkdir(root.hostPath(instance).c_str(), 0700) != 0 && errno != EEXIST) return errnoError(errno, instance);
  DmaCounters counters(root, instance);  // from here on, a failure removes the instance
  counters.sweep_ = std::move(sweep);

  sysfs::RootWriter writer(root);
  // Nothing is ever written to this instance's ring buffer (the triggers run in soft mode): give
  // back the memory mkdir took (docs/kernel.md §10). The kernel rounds 4 up to its minimum.
  if (auto r = writer.write(instance + "/buffer_size_kb", "4"); !r) return r.error();

  for (const core::DmaEventSpec& spec : core::dmaEventSpecs()) {
    std::string dir;
    core::Result<std::string> formatText = Error{ENOENT, "", ""};
    for (std::string_view name : spec.names()) {  // the name of 6.18 on, else the older one
      dir = eventDir(instance, spec, name);
      formatText = root.readFile(dir + "/format");
      if (formatText || formatText.error().code != ENOENT) break;
    }
    if (!formatText) {
      if (formatText.error().code != ENOENT) return formatText.error();
      counters.absent_.push_back(spec.event);
      continue;
    }
    auto format = core::parseEventFormat(*formatText);
    if (!format) return Error{EINVAL, dir + "/format", format.error().message};
    auto missing = core::missingFields(spec, *format);
    if (!missing.empty()) return Error{EINVAL, dir + "/format", "the event has no field " + missing.front()};
    if (auto r = writer.write(dir + "/trigger", spec.trigger()); !r) return r.error();
    counters.armed_.emplace_back(spec.event, dir);
  }
  return counters;
}

Result<core::DmaReading> DmaCounters::read() const {
  std::map<core::DmaEvent, core::Hist> hists;
  for (const auto& [event, dir] : armed_) {
    std::string path = dir + "/hist";
    auto text = readAll(*root_, path);
    if (!text) return text.error();
    auto hist = core::parseHist(*text);
    if (!hist) return Error{EINVAL, path, hist.error().message};
    hists[event] = std::move(*hist);
  }
  return core::readingFromHists(hists);
}

}  // namespace iommud::adapters::trace
