#include "support/fake_kernel.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "core/domain_rules.hpp"

namespace iommud::testing {

namespace fs = std::filesystem;
using core::Done;
using core::KernelVersion;

namespace {

core::Error err(int code, std::string_view path) {
  return core::errnoError(code, std::string(path));
}

std::string trimmed(std::string_view v) {
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
  return std::string(v);
}

std::string readText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return trimmed(s.str());
}

// A negative number has to be an int; a non-negative one is taken as uint (the common case).
FakeKernel::ParamSpec inferParam(const std::string& current) {
  using T = FakeKernel::ParamType;
  if (current == "Y" || current == "N") return {T::Bool, std::nullopt};
  std::string_view digits = current;
  bool negative = digits.starts_with('-');
  if (negative) digits.remove_prefix(1);
  bool number = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (!number) return {T::Charp, std::nullopt};
  return {negative ? T::Int : T::Uint, std::nullopt};
}

// kstrtoull(s, 0) as lib/kstrtox.c reads it: an optional '+', a base from the prefix (0x: 16,
// 0: 8, else 10), at least one digit, and one optional trailing newline. ERANGE on overflow.
core::Result<unsigned long long> kstrtoull(std::string_view s) {
  if (s.ends_with('\n')) s.remove_suffix(1);
  if (s.starts_with('+')) s.remove_prefix(1);
  unsigned base = 10;
  if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
  }
  if (s.empty()) return core::errnoError(EINVAL, "");
  unsigned long long v = 0;
  for (char c : s) {
    unsigned d = c >= '0' && c <= '9'   ? unsigned(c - '0')
                 : c >= 'a' && c <= 'f' ? unsigned(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? unsigned(c - 'A' + 10)
                                        : 99U;
    if (d >= base) return core::errnoError(EINVAL, "");
    if (v > (~0ULL - d) / base) return core::errnoError(ERANGE, "");
    v = v * base + d;
  }
  return v;
}

// What param_set_{uint,int,bool,charp} store for `value`, or their errno.
core::Result<std::string> parseParam(const FakeKernel::ParamSpec& spec, std::string_view value) {
  using T = FakeKernel::ParamType;
  long long n = 0;
  switch (spec.type) {
    case T::Charp: return trimmed(value);
    case T::Bool: {  // kstrtobool(): the first character (or "on"/"off") decides
      if (value.empty()) return core::errnoError(EINVAL, "");
      char c = value[0];
      if (std::string_view("yYtT1").find(c) != std::string_view::npos) return std::string("Y");
      if (std::string_view("nNfF0").find(c) != std::string_view::npos) return std::string("N");
      if ((c == 'o' || c == 'O') && value.size() > 1) {
        if (value[1] == 'n' || value[1] == 'N') return std::string("Y");
        if (value[1] == 'f' || value[1] == 'F') return std::string("N");
      }
      return core::errnoError(EINVAL, "");
    }
    case T::Uint: {
      auto v = kstrtoull(value);
      if (!v) return v.error();
      if (*v > 0xffffffffULL) return core::errnoError(ERANGE, "");
      n = static_cast<long long>(*v);
      break;
    }
    case T::Int: {
      std::string_view s = value;
      bool negative = s.starts_with('-');
      if (negative) s.remove_prefix(1);
      auto v = kstrtoull(s);
      if (!v) return v.error();
      if (*v > (negative ? 0x80000000ULL : 0x7fffffffULL)) return core::errnoError(ERANGE, "");
      n = negative ? -static_cast<long long>(*v) : static_cast<long long>(*v);
      break;
    }
  }
  if (spec.range && (n < spec.range->first || n > spec.range->second)) return core::errnoError(EINVAL, "");
  return std::to_string(n);
}

}  // namespace

FakeKernel::FakeKernel(fs::path root, KernelVersion version) : root_(std::move(root)), version_(version) {
  // The drivers that exist: those some device is bound to.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / "sys/bus/pci/devices", ec)) {
    const std::string address = e.path().filename().string();
    if (auto d = driverOf(address)) {
      drivers_.insert(*d);
      matching_[address].insert(*d);
    }
  }
  for (const auto& d : drivers_) fs::create_directories(root_ / "sys/bus/pci/drivers" / d);
}

fs::path FakeKernel::host(std::string_view path) const {
  return root_ / std::string(path.substr(1));
}

core::Result<Done> FakeKernel::write(std::string_view path, std::string_view value) {
  if (before_) before_(path, value);
  auto result = [&]() -> core::Result<Done> {
    std::string p(path);
    constexpr std::string_view groups = "/sys/kernel/iommu_groups/";
    constexpr std::string_view drivers = "/sys/bus/pci/drivers/";
    if (path.starts_with(groups) && path.ends_with("/type")) {
      auto id = path.substr(groups.size(), path.size() - groups.size() - 5);
      if (!fs::exists(host(path))) return err(ENOENT, path);
      return writeType(std::stoi(std::string(id)), value);
    }
    if (path.starts_with(drivers)) {
      auto rest = path.substr(drivers.size());
      auto slash = rest.find('/');
      std::string driver(rest.substr(0, slash));
      std::string action(rest.substr(slash + 1));
      if (!drivers_.contains(driver)) return err(ENOENT, path);
      if (action == "unbind") return unbind(driver, trimmed(value));
      if (action == "bind") return bind(driver, trimmed(value));
      return err(ENOENT, path);
    }
    if (path.starts_with("/sys/module/")) return writeParam(p, value);
    return err(EACCES, path);
  }();
  log_.push_back(std::string(path) + " <- " + trimmed(value) + (result ? "" : " : " + result.error().message));
  return result;
}

std::optional<std::string> FakeKernel::driverOf(const std::string& address) const {
  std::error_code ec;
  auto link = fs::read_symlink(root_ / "sys/bus/pci/devices" / address / "driver", ec);
  if (ec) return std::nullopt;
  return link.filename().string();
}

bool FakeKernel::untrusted(const std::string& address) const {
  return readText(root_ / "sys/bus/pci/devices" / address / "removable") == "removable";
}

std::vector<std::string> FakeKernel::groupDevices(int group) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e :
       fs::directory_iterator(root_ / "sys/kernel/iommu_groups" / std::to_string(group) / "devices", ec)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

// iommu_group_store_type() of version_: the checks and their order are core::judgeTypeWrite's, the
// one table of the kernel's domain rules (docs/kernel.md §2.2) that iommud plans with too; what
// the fake adds is the state it judges (drivers, trust, required types) read from the root.
core::Result<Done> FakeKernel::writeType(int group, std::string_view value) {
  const std::string path = "/sys/kernel/iommu_groups/" + std::to_string(group) + "/type";
  core::GroupAtWrite g;
  g.capable = capable_;
  g.current = core::parseDomainType(readText(host(path)));
  if (g.current == core::DomainType::Unknown) g.current.reset();
  for (const auto& d : groupDevices(group)) {
    core::GroupAtWrite::Member m;
    m.driver = driverOf(d);
    m.untrusted = untrusted(d);
    if (auto it = required_.find(d); it != required_.end()) m.required = core::parseDomainType(it->second);
    g.members.push_back(std::move(m));
  }
  auto verdict = core::judgeTypeWrite(core::domainRules(version_), g, value);
  if (!verdict.taken()) return err(verdict.error, path);
  std::ofstream(host(path)) << core::toString(*verdict.result) << "\n";
  return Done{};
}

core::Result<Done> FakeKernel::unbind(const std::string& driver, const std::string& address) {
  const std::string path = "/sys/bus/pci/drivers/" + driver + "/unbind";
  if (!fs::exists(root_ / "sys/bus/pci/devices" / address)) return err(ENODEV, path);
  if (driverOf(address) != driver) return err(ENODEV, path);  // unbind_store: dev->driver != drv
  fs::remove(root_ / "sys/bus/pci/devices" / address / "driver");
  setUeventDriver(address, std::nullopt);
  return Done{};
}

core::Result<Done> FakeKernel::bind(const std::string& driver, const std::string& address) {
  const std::string path = "/sys/bus/pci/drivers/" + driver + "/bind";
  fs::path dev = root_ / "sys/bus/pci/devices" / address;
  if (!fs::exists(dev)) return err(ENODEV, path);
  // bind_store(): a driver that does not match the device is ENODEV, before the device's own state.
  if (auto it = matching_.find(address); it == matching_.end() || !it->second.contains(driver)) {
    return err(ENODEV, path);
  }
  if (driverOf(address)) return err(EBUSY, path);
  if (auto it = probeFails_.find(address); it != probeFails_.end()) return err(it->second, path);
  fs::path real = fs::canonical(dev);
  fs::create_directory_symlink((root_ / "sys/bus/pci/drivers" / driver).lexically_relative(real), real / "driver");
  setUeventDriver(address, driver);
  return Done{};
}

core::Result<Done> FakeKernel::writeParam(const std::string& path, std::string_view value) {
  struct stat st {};
  if (::stat(host(path).c_str(), &st) != 0) return err(ENOENT, path);
  if ((st.st_mode & 0222U) == 0) return err(EACCES, path);  // no write bit: sysfs refuses even root
  auto spec = params_.find(path);
  if (spec == params_.end()) spec = params_.emplace(path, inferParam(readText(host(path)))).first;
  auto parsed = parseParam(spec->second, value);
  if (!parsed) return err(parsed.error().code, path);
  std::ofstream(host(path)) << *parsed << "\n";
  return Done{};
}

// The device's uevent names its driver while one is bound (what iommud's reader takes it from).
void FakeKernel::setUeventDriver(const std::string& address, const std::optional<std::string>& driver) {
  fs::path uevent = root_ / "sys/bus/pci/devices" / address / "uevent";
  std::ifstream in(uevent);
  std::string line, out;
  if (driver) out = "DRIVER=" + *driver + "\n";
  while (std::getline(in, line)) {
    if (!line.starts_with("DRIVER=")) out += line + "\n";
  }
  in.close();
  std::ofstream(uevent) << out;
}

void FakeKernel::removeDevice(const std::string& address) {
  fs::path link = root_ / "sys/bus/pci/devices" / address;
  std::error_code ec;
  fs::path real = fs::canonical(link, ec);
  if (!ec) fs::remove_all(real);
  fs::remove(link, ec);
  // The kernel frees a group with its last device: the group's directory goes too.
  std::vector<fs::path> empty;
  for (const auto& g : fs::directory_iterator(root_ / "sys/kernel/iommu_groups", ec)) {
    if (fs::remove(g.path() / "devices" / address, ec) && fs::is_empty(g.path() / "devices", ec)) {
      empty.push_back(g.path());
    }
  }
  for (const auto& g : empty) fs::remove_all(g, ec);
}

}  // namespace iommud::testing
