#include "adapters/ethtool/netlink.hpp"

#include <linux/netlink.h>
#include <net/if.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/utsname.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace iommud::adapters::ethtool {

namespace {

// The control family's fixed id (include/uapi/linux/genetlink.h).
constexpr uint16_t kGenlIdCtrl = 0x10;

// libnl returns its own NLE_* codes; the errno of the failed system call is still in errno.
core::Error socketError(const std::string& what, int nlError) {
  int code = errno != 0 ? errno : EIO;
  return core::Error{code, "", what + ": " + nl_geterror(nlError)};
}

std::string interfaceName(int ifindex) {
  std::array<char, IF_NAMESIZE> name{};
  if (if_indextoname(static_cast<unsigned>(ifindex), name.data()) != nullptr) return name.data();
  return "ifindex " + std::to_string(ifindex);
}

std::string what(Kind kind, Op op, int ifindex) {
  return describeRequest(kind, op, interfaceName(ifindex));
}

// The message of a datagram that answers `seq`, as the codec cuts it; the bytes stay owned here.
std::optional<Message> onlyMessage(const Bytes& bytes) {
  auto messages = splitMessages(bytes);
  if (!messages || messages->size() != 1) return std::nullopt;
  return messages->front();
}

}  // namespace

void Ethtool::SocketDeleter::operator()(nl_sock* sock) const {
  nl_socket_free(sock);
}

Ethtool::Ethtool(std::unique_ptr<nl_sock, SocketDeleter> sock, std::optional<core::KernelVersion> kernel)
    : sock_(std::move(sock)), kernel_(kernel) {}

core::Result<Ethtool> Ethtool::open(std::optional<core::KernelVersion> kernel) {
  if (!kernel) {
    utsname uts{};
    if (uname(&uts) == 0) kernel = core::parseKernelVersion(uts.release);
  }
  std::unique_ptr<nl_sock, SocketDeleter> sock(nl_socket_alloc());
  if (!sock) return core::Error{ENOMEM, "", "cannot allocate a netlink socket"};
  errno = 0;
  if (int err = genl_connect(sock.get()); err < 0) return socketError("cannot open a generic netlink socket", err);
  const int fd = nl_socket_get_fd(sock.get());
  const int on = 1;
  // Extended acks carry the kernel's reason in words and the offending attribute (4.12); capped
  // acks do not echo the request back (4.3). Kernels without them still answer, only more tersely.
  (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &on, sizeof on);
  (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &on, sizeof on);
  // The kernel answers a request before sendmsg() returns; the timeout only guards against a bug.
  const timeval timeout{5, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  // Read each datagram whole, however large the family description grows.
  nl_socket_enable_msg_peek(sock.get());

  Ethtool ethtool(std::move(sock), kernel);
  const uint32_t seq = ++ethtool.seq_;
  auto answer = ethtool.exchange(encodeGetFamily(seq), seq, kGenlIdCtrl);
  if (!answer) return answer.error();
  if (answer->ack.error == ENOENT) {
    return core::Error{ENOENT, "",
                       "the kernel has no ethtool netlink family: it came in Linux 5.6 (rings, channels and "
                       "coalescing in 5.7) and needs CONFIG_ETHTOOL_NETLINK"};
  }
  if (answer->ack.error != 0) {
    std::string text = std::string("cannot resolve the ethtool netlink family: ") + std::strerror(answer->ack.error);
    if (!answer->ack.message.empty()) text += " (kernel: " + answer->ack.message + ")";
    return core::Error{answer->ack.error, "", text};
  }
  auto message = onlyMessage(answer->reply);
  if (!message) return core::Error{EPROTO, "", "the kernel acked CTRL_CMD_GETFAMILY without describing the family"};
  auto family = decodeFamily(*message);
  if (!family) return family.error();
  // An empty list means the kernel did not say; then the first request tells.
  if (!family->commands.empty() &&
      !(family->supports(Kind::Rings) && family->supports(Kind::Channels) && family->supports(Kind::Coalesce))) {
    return core::Error{EOPNOTSUPP, "",
                       "this kernel's ethtool netlink family has no rings, channels or coalescing messages "
                       "(they came in Linux 5.7)"};
  }
  ethtool.family_ = std::move(*family);
  return ethtool;
}

core::Result<Ethtool::Answer> Ethtool::exchange(const Bytes& request, uint32_t seq, uint16_t replyType) {
  errno = 0;
  // nl_sendto() takes a mutable pointer but only passes it to sendto().
  int sent = nl_sendto(sock_.get(), const_cast<uint8_t*>(request.data()), request.size());
  if (sent < 0) return socketError("cannot send to the kernel", sent);
  Answer answer;
  for (;;) {
    sockaddr_nl peer{};
    unsigned char* buffer = nullptr;
    errno = 0;
    int received = nl_recv(sock_.get(), &peer, &buffer, nullptr);
    std::unique_ptr<unsigned char, decltype(&std::free)> owned(buffer, &std::free);
    if (received < 0) return socketError("cannot receive from the kernel", received);
    if (received == 0) return core::Error{EPROTO, "", "the kernel closed the netlink socket without answering"};
    if (peer.nl_pid != 0) continue;  // only the kernel speaks on this socket
    Bytes datagram(buffer, buffer + received);
    auto messages = splitMessages(datagram);
    if (!messages) return messages.error();
    for (const auto& m : *messages) {
      if (m.seq != seq) continue;  // a late answer to an earlier request
      if (m.type == kNlmsgError) {
        auto ack = decodeAck(m);
        if (!ack) return ack.error();
        answer.ack = std::move(*ack);
        return answer;
      }
      if (m.type == replyType) answer.reply.assign(m.bytes.begin(), m.bytes.end());
    }
  }
}

core::Result<Reply> Ethtool::get(int ifindex, Kind kind) {
  if (ifindex <= 0) return describeFailure(kind, Op::Read, interfaceName(ifindex), {}, Ack{ENODEV}, kernel_);
  const uint32_t seq = ++seq_;
  const Bytes request = encodeGet(family_.id, kind, static_cast<uint32_t>(ifindex), seq);
  auto answer = exchange(request, seq, family_.id);
  if (!answer) return answer.error();
  if (answer->ack.error != 0) {
    return describeFailure(kind, Op::Read, interfaceName(ifindex), request, answer->ack, kernel_);
  }
  auto message = onlyMessage(answer->reply);
  if (!message) {
    return core::Error{EPROTO, "", what(kind, Op::Read, ifindex) + ": the kernel acked without a reply"};
  }
  auto reply = decodeReply(kind, *message);
  if (!reply) return reply.error();
  if (reply->ifindex != static_cast<uint32_t>(ifindex)) {
    return core::Error{
        EPROTO, "", what(kind, Op::Read, ifindex) + ": the reply is about ifindex " + std::to_string(reply->ifindex)};
  }
  return reply;
}

core::Result<core::EthtoolState> Ethtool::read(int ifindex) {
  core::EthtoolState state;
  for (Kind kind : {Kind::Rings, Kind::Channels, Kind::Coalesce}) {
    auto reply = get(ifindex, kind);
    if (!reply) {
      if (reply.error().code == EOPNOTSUPP) continue;  // the driver has no get_ringparam & co.
      return reply.error();
    }
    store(state, kind, std::move(*reply));
  }
  state.read = true;
  return state;
}

core::Result<Applied> Ethtool::set(int ifindex, Kind kind, const std::map<std::string, uint32_t>& values) {
  if (values.empty()) return Applied{};
  if (ifindex <= 0) return describeFailure(kind, Op::Change, interfaceName(ifindex), {}, Ack{ENODEV}, kernel_);
  const uint32_t seq = ++seq_;
  auto request = encodeSet(family_.id, kind, static_cast<uint32_t>(ifindex), values, seq);
  if (!request) return request.error();
  auto answer = exchange(*request, seq, family_.id);
  if (!answer) return answer.error();
  if (answer->ack.error != 0) {
    return describeFailure(kind, Op::Change, interfaceName(ifindex), *request, answer->ack, kernel_);
  }
  return Applied{answer->ack.message};
}

}  // namespace iommud::adapters::ethtool
