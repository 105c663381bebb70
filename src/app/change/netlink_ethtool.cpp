#include "app/change/netlink_ethtool.hpp"

#include <cerrno>

namespace iommud::app {

namespace {

adapters::ethtool::Kind kindOf(core::ChangeKind k) {
  using K = adapters::ethtool::Kind;
  return k == core::ChangeKind::Rings ? K::Rings : k == core::ChangeKind::Channels ? K::Channels : K::Coalesce;
}

}  // namespace

core::Result<std::unique_ptr<NetlinkEthtool>> NetlinkEthtool::open(const std::optional<core::KernelVersion>& kernel) {
  auto eth = adapters::ethtool::Ethtool::open(kernel);
  if (!eth) return eth.error();
  return std::unique_ptr<NetlinkEthtool>(new NetlinkEthtool(std::move(eth).value()));
}

core::Result<uint32_t> NetlinkEthtool::get(int ifindex, core::ChangeKind kind, const std::string& key) {
  auto reply = eth_.get(ifindex, kindOf(kind));
  if (!reply) return reply.error();
  auto it = reply->values.find(key);
  if (it == reply->values.end()) {
    return core::Error{EOPNOTSUPP, reply->ifname, "the driver does not report " + key};
  }
  return it->second;
}

core::Result<core::Done> NetlinkEthtool::set(int ifindex, core::ChangeKind kind, const std::string& key,
                                             uint32_t value) {
  auto applied = eth_.set(ifindex, kindOf(kind), {{key, value}});
  if (!applied) return applied.error();
  return core::Done{};
}

void NetlinkEthtool::readAll(core::HostFacts& host) {
  for (auto& d : host.devices) {
    for (auto& n : d.netdevs) {
      if (n.ifindex <= 0) continue;
      if (auto state = eth_.read(n.ifindex)) {
        n.ethtool = std::move(state).value();
      }
    }
  }
}

}  // namespace iommud::app
