#pragma once

#include <memory>
#include <optional>

#include "adapters/ethtool/netlink.hpp"
#include "app/change/ethtool_port.hpp"
#include "core/host.hpp"

namespace iommud::app {

/// The ethtool port of apply and revert over generic netlink (adapters/ethtool).
class NetlinkEthtool final : public EthtoolPort {
 public:
  /// Opens the socket; fails where the kernel has no ethtool netlink family (before 5.6/5.7).
  static core::Result<std::unique_ptr<NetlinkEthtool>> open(const std::optional<core::KernelVersion>& kernel);

  core::Result<uint32_t> get(int ifindex, core::ChangeKind kind, const std::string& key) override;
  core::Result<core::Done> set(int ifindex, core::ChangeKind kind, const std::string& key, uint32_t value) override;

  /// Fills NetDev::ethtool of every interface of the host; an interface that cannot be read
  /// (gone, or no driver support) stays unread and is planned as "unknown".
  void readAll(core::HostFacts& host);

 private:
  explicit NetlinkEthtool(adapters::ethtool::Ethtool eth) : eth_(std::move(eth)) {}
  adapters::ethtool::Ethtool eth_;
};

}  // namespace iommud::app
