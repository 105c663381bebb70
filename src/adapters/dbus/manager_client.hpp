#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapters/dbus/manager_api.hpp"
#include "core/result.hpp"

struct sd_bus;

namespace iommud::adapters::dbus {

/// iommuctl's side of org.iommud1.Manager. Errors carry the daemon's message; an error whose
/// code is EACCES is the bus or the daemon refusing a caller that is not root.
class ManagerClient {
 public:
  /// The running daemon, or nullopt when there is no system bus or nobody owns kBusName (then
  /// iommuctl works on the host itself).
  static std::optional<ManagerClient> connect();

  ManagerClient(ManagerClient&&) noexcept;
  ManagerClient& operator=(ManagerClient&&) noexcept;
  ManagerClient(const ManagerClient&) = delete;
  ManagerClient& operator=(const ManagerClient&) = delete;
  ~ManagerClient();

  core::Result<std::vector<Action>> apply(bool hotplug, const std::string& device);
  core::Result<std::vector<Action>> revert(const std::string& device);
  core::Result<std::string> plan(bool hotplug, const std::string& device);
  core::Result<core::Done> reload();
  core::Result<DaemonSummary> daemon();

 private:
  explicit ManagerClient(sd_bus* bus) : bus_(bus) {}
  sd_bus* bus_ = nullptr;
};

}  // namespace iommud::adapters::dbus
