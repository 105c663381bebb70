#pragma once

#include <cstdint>
#include <string>

#include "core/plan.hpp"
#include "core/result.hpp"

namespace iommud::app {

/// The ethtool operations apply and revert need; the real one speaks netlink, tests fake it.
class EthtoolPort {
 public:
  EthtoolPort() = default;
  EthtoolPort(const EthtoolPort&) = delete;
  EthtoolPort& operator=(const EthtoolPort&) = delete;
  virtual ~EthtoolPort() = default;
  virtual core::Result<uint32_t> get(int ifindex, core::ChangeKind kind, const std::string& key) = 0;
  virtual core::Result<core::Done> set(int ifindex, core::ChangeKind kind, const std::string& key, uint32_t value) = 0;
};

}  // namespace iommud::app
