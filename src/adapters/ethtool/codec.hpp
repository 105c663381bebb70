#pragma once

// The ethtool generic netlink messages as bytes: requests are encoded and answers decoded here,
// with no socket (docs/kernel.md §8, include/uapi/linux/ethtool_netlink.h). Netlink integers are in
// host byte order. Every decoder checks lengths before it reads: bad input is an Error, never UB.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/kernel_version.hpp"
#include "core/names.hpp"
#include "core/policy.hpp"
#include "core/result.hpp"

namespace iommud::adapters::ethtool {

/// Bytes for the kernel; what it answers is read through a ByteView.
using Bytes = std::vector<uint8_t>;
/// Bytes as the decoders read them.
using ByteView = std::span<const uint8_t>;

/// The three groups of settings iommud tunes; each has its own GET, SET and GET_REPLY message.
enum class Kind { Rings, Channels, Coalesce };
inline constexpr core::Names<Kind, 3> kKindNames{
    {{Kind::Rings, "rings"}, {Kind::Channels, "channels"}, {Kind::Coalesce, "coalesce"}}};
static_assert(core::checkNames(kKindNames, Kind::Coalesce));
/// "rings", "channels", "coalesce".
std::string_view toString(Kind kind);

/// How a value travels: NLA_U32, or NLA_U8 for booleans and tcp-data-split.
enum class AttrType { U32, U8 };

/// One ethtool setting: its ethtool name (as in core::ringKeys() and its siblings) and its
/// ETHTOOL_A_<KIND>_* attribute.
struct Attribute {
  std::string_view name;
  uint16_t id = 0;
  AttrType type = AttrType::U32;
  uint16_t maxId = 0;  // the *_MAX attribute replies carry its maximum in; 0 when there is none
};
/// The attributes of a kind iommud knows, in id order.
std::span<const Attribute> attributes(Kind kind);
const Attribute* findAttribute(Kind kind, std::string_view name);
const Attribute* attributeById(Kind kind, uint16_t id);

/// One netlink message of a datagram: its header fields and all of its bytes (header included).
struct Message {
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t seq = 0;
  uint32_t pid = 0;
  ByteView bytes;
};
/// Cuts a datagram from the kernel into its messages.
core::Result<std::vector<Message>> splitMessages(ByteView datagram);

/// The netlink message type of NLMSG_ERROR, which also carries acks.
inline constexpr uint16_t kNlmsgError = 2;

/// The generic netlink family "ethtool" as CTRL_CMD_GETFAMILY describes it.
struct Family {
  uint16_t id = 0;
  uint32_t version = 0;
  std::vector<uint32_t> commands;  // CTRL_ATTR_OPS: the ETHTOOL_MSG_* this kernel implements

  /// Whether the kernel implements GET and SET of a kind (5.7; 5.6 has the family without them).
  [[nodiscard]] bool supports(Kind kind) const;
};
/// CTRL_CMD_GETFAMILY for "ethtool", asking for an ack.
Bytes encodeGetFamily(uint32_t seq);
/// The CTRL_CMD_NEWFAMILY answer; an error if it is about another family or lacks the id.
core::Result<Family> decodeFamily(const Message& message);

/// ETHTOOL_MSG_<KIND>_GET for an interface, asking for an ack; no header flags.
Bytes encodeGet(uint16_t family, Kind kind, uint32_t ifindex, uint32_t seq);
/// ETHTOOL_MSG_<KIND>_SET with the named values; an error for a name the kind does not have or
/// a value too large for a u8 attribute.
core::Result<Bytes> encodeSet(uint16_t family, Kind kind, uint32_t ifindex,
                              const std::map<std::string, uint32_t>& values, uint32_t seq);

/// A decoded ETHTOOL_MSG_<KIND>_GET_REPLY: the interface and its values and maxima by name.
struct Reply {
  uint32_t ifindex = 0;
  std::string ifname;
  std::map<std::string, uint32_t> values;
  std::map<std::string, uint32_t> maxima;  // "rx" for RX_MAX, "tx-push-buf-len", "hds-thresh"
};
/// Decodes a GET_REPLY; attributes this code does not know (newer kernels) are skipped.
core::Result<Reply> decodeReply(Kind kind, const Message& message);
/// Puts a reply into the state's maps of its kind (coalescing has no maxima).
void store(core::EthtoolState& state, Kind kind, Reply reply);

/// An NLMSG_ERROR: the errno (0 for an ack) and the kernel's extended ack, if it sent one.
struct Ack {
  int error = 0;                        // positive errno, 0 for success
  std::string message;                  // NLMSGERR_ATTR_MSG
  std::optional<uint32_t> offset;       // NLMSGERR_ATTR_OFFS: where in the request the culprit starts
  std::optional<uint32_t> missingType;  // NLMSGERR_ATTR_MISS_TYPE (6.0): an attribute that was needed
};
/// Decodes an NLMSG_ERROR with or without NLM_F_CAPPED and NLM_F_ACK_TLVS.
core::Result<Ack> decodeAck(const Message& message);

/// The top-level attribute of a request that an NLMSGERR_ATTR_OFFS points into: its ethtool
/// name, "header" for the header nest, or "attribute N" for an id this code does not know.
std::optional<std::string> attributeAt(Kind kind, ByteView request, uint32_t offset);

/// What a request tries to do, for messages.
enum class Op { Read, Change };
/// "ring change on veth0", "coalescing read on eth0": how messages about a request begin.
std::string describeRequest(Kind kind, Op op, std::string_view ifname);
/// A failed request in words: "ring change on veth0: not supported by the driver (Operation not
/// supported; kernel: ...)". The errno stays in Error::code: ENODEV means the interface went away
/// (normal hotplug). `request` is what was sent (it names the attribute the kernel points at);
/// `kernel` is the running upstream version, to name attributes added after it.
core::Error describeFailure(Kind kind, Op op, std::string_view ifname, ByteView request, const Ack& ack,
                            std::optional<core::KernelVersion> kernel);

/// A rule's amount as a number: a number stays, "max" (nullopt) becomes the device's maximum
/// from a state read before. An error when the state was not read or reports no maximum.
core::Result<uint32_t> resolve(const core::EthtoolState& state, Kind kind, std::string_view name,
                               const core::Amount& amount);
/// resolve() for every entry of a rule's map, ready for Ethtool::set().
core::Result<std::map<std::string, uint32_t>> resolve(const core::EthtoolState& state, Kind kind,
                                                      const std::map<std::string, core::Amount>& amounts);

}  // namespace iommud::adapters::ethtool
