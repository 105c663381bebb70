#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "adapters/ethtool/codec.hpp"
#include "core/host.hpp"
#include "core/kernel_version.hpp"
#include "core/result.hpp"

struct nl_sock;

namespace iommud::adapters::ethtool {

/// What a successful change leaves behind: the kernel may attach a note to its ack.
struct Applied {
  std::string kernelNote;  // the extended ack's message, usually empty
};

/// A generic netlink socket of the ethtool family, bound to the network namespace it was opened
/// in; one per thread. It only sends what the codec encodes and hands it what the kernel answers.
class Ethtool {
 public:
  /// Opens the socket (with NETLINK_EXT_ACK and NETLINK_CAP_ACK) and resolves the family once.
  /// Fails with a clear message where the family (5.6) or its rings/channels/coalesce messages
  /// (5.7) are missing. `kernel` is the running upstream version, named in errors about
  /// attributes newer than it; nullopt takes it from uname().
  static core::Result<Ethtool> open(std::optional<core::KernelVersion> kernel = std::nullopt);

  /// Rings, channels and coalescing of an interface. A kind the driver lacks (EOPNOTSUPP) stays
  /// empty; any other failure (ENODEV: the interface is gone) is an error.
  core::Result<core::EthtoolState> read(int ifindex);
  /// One kind; EOPNOTSUPP is an error here.
  core::Result<Reply> get(int ifindex, Kind kind);
  /// Sets named values (ethtool names, "max" already resolved with resolve()) in one request.
  /// The error says what the errno means here and quotes the kernel's extended ack.
  core::Result<Applied> set(int ifindex, Kind kind, const std::map<std::string, uint32_t>& values);

  [[nodiscard]] const Family& family() const { return family_; }

 private:
  struct SocketDeleter {
    void operator()(nl_sock* sock) const;
  };
  /// The kernel's answer to one request: the reply message, if any, and the ack or error.
  struct Answer {
    Bytes reply;
    Ack ack;
  };

  Ethtool(std::unique_ptr<nl_sock, SocketDeleter> sock, std::optional<core::KernelVersion> kernel);
  core::Result<Answer> exchange(const Bytes& request, uint32_t seq, uint16_t replyType);

  std::unique_ptr<nl_sock, SocketDeleter> sock_;
  Family family_;
  std::optional<core::KernelVersion> kernel_;
  uint32_t seq_ = 0;
};

}  // namespace iommud::adapters::ethtool
