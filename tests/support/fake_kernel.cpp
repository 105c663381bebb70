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

}  // namespace

FakeKernel::FakeKernel(fs::path root, KernelVersion version) : root_(std::move(root)), version_(version) {
  // The drivers that exist: those some device is bound to.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / "sys/bus/pci/devices", ec)) {
    if (auto d = driverOf(e.path().filename().string())) drivers_.insert(*d);
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
  std::ofstream(host(path)) << trimmed(value) << "\n";
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
