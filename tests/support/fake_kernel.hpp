#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/sysfs/writer.hpp"
#include "core/kernel_version.hpp"

namespace iommud::testing {

/// An in-process kernel behind the sysfs-writer interface, over a synthetic root (FakeHost): it
/// answers writes of group `type`, driver `bind`/`unbind` and module parameters as the given kernel
/// version does (docs/kernel.md §2.2), and really moves the driver links and rewrites the type file,
/// so that reading the root afterwards shows what the kernel would.
class FakeKernel final : public adapters::sysfs::SysfsWriter {
 public:
  FakeKernel(std::filesystem::path root, core::KernelVersion version);

  core::Result<core::Done> write(std::string_view path, std::string_view value) override;

  /// Every write, as "path <- value", failed ones too.
  [[nodiscard]] const std::vector<std::string>& log() const { return log_; }
  /// The process lacks CAP_SYS_ADMIN/CAP_SYS_RAWIO: type writes fail with EACCES.
  void dropCapabilities() { capable_ = false; }
  /// Binding `address` fails in the driver's probe with `error` (the device stays unbound); 0 heals it.
  void failProbe(const std::string& address, int error) {
    if (error == 0) {
      probeFails_.erase(address);
    } else {
      probeFails_[address] = error;
    }
  }
  /// The device requires this type (a driver's def_domain_type): other types fail with EINVAL.
  void requireType(const std::string& address, std::string type) { required_[address] = std::move(type); }
  /// Called before each write is judged: a test can remove a device at exactly that moment.
  void beforeWrite(std::function<void(std::string_view path, std::string_view value)> f) { before_ = std::move(f); }
  /// Hot-unplugs a device: its directory and every link to it disappear.
  void removeDevice(const std::string& address);
  /// `driver` matches `address` (bind_store's driver_match_device()); the drivers bound at
  /// construction match their devices. Binding a driver that does not match fails with ENODEV.
  void matchDriver(const std::string& address, const std::string& driver) { matching_[address].insert(driver); }

  /// A module parameter's kernel_param_ops, as far as a write is concerned: the type's parser
  /// (kstrtouint, kstrtoint, kstrtobool; charp takes anything) and a custom setter's range.
  enum class ParamType { Uint, Int, Bool, Charp };
  struct ParamSpec {
    ParamType type = ParamType::Uint;
    std::optional<std::pair<long long, long long>> range;  // a custom set op's bounds: EINVAL outside
  };
  /// Declares the parameter at `path`; an undeclared one is typed by its value at the first write
  /// (a number: uint, or int when negative; Y/N: bool; anything else: charp).
  void declareParam(const std::string& path, ParamSpec spec) { params_[path] = spec; }

 private:
  core::Result<core::Done> writeType(int group, std::string_view value);
  core::Result<core::Done> unbind(const std::string& driver, const std::string& address);
  core::Result<core::Done> bind(const std::string& driver, const std::string& address);
  core::Result<core::Done> writeParam(const std::string& path, std::string_view value);
  [[nodiscard]] std::filesystem::path host(std::string_view path) const;
  [[nodiscard]] std::vector<std::string> groupDevices(int group) const;
  [[nodiscard]] std::optional<std::string> driverOf(const std::string& address) const;
  [[nodiscard]] bool untrusted(const std::string& address) const;
  void setUeventDriver(const std::string& address, const std::optional<std::string>& driver);

  std::filesystem::path root_;
  core::KernelVersion version_;
  bool capable_ = true;
  std::set<std::string> drivers_;
  std::map<std::string, int> probeFails_;
  std::map<std::string, std::string> required_;
  std::map<std::string, std::set<std::string>> matching_;
  std::map<std::string, ParamSpec> params_;
  std::function<void(std::string_view, std::string_view)> before_;
  std::vector<std::string> log_;
};

}  // namespace iommud::testing
