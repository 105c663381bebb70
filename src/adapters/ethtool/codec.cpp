#include "adapters/ethtool/codec.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

namespace iommud::adapters::ethtool {

namespace {

// include/uapi/linux/netlink.h
constexpr size_t kNlmsgHeaderSize = 16;
constexpr uint16_t kNlmFRequest = 0x1;
constexpr uint16_t kNlmFAck = 0x4;
constexpr uint16_t kNlmFCapped = 0x100;   // NETLINK_CAP_ACK: the request's payload is not echoed (4.3)
constexpr uint16_t kNlmFAckTlvs = 0x200;  // extended ack attributes follow (4.12)
constexpr uint16_t kNlaFNested = 0x8000;
constexpr uint16_t kNlaTypeMask = 0x3fff;  // without NLA_F_NESTED and NLA_F_NET_BYTEORDER
constexpr uint16_t kNlmsgerrAttrMsg = 1;
constexpr uint16_t kNlmsgerrAttrOffs = 2;
constexpr uint16_t kNlmsgerrAttrMissType = 5;
// The largest errno the kernel returns (MAX_ERRNO): anything beyond is not an errno.
constexpr int kMaxErrno = 4095;

// include/uapi/linux/genetlink.h
constexpr size_t kGenlHeaderSize = 4;
constexpr size_t kPayloadStart = kNlmsgHeaderSize + kGenlHeaderSize;
constexpr uint16_t kGenlIdCtrl = 0x10;
constexpr uint8_t kCtrlCmdNewFamily = 1;
constexpr uint8_t kCtrlCmdGetFamily = 3;
constexpr uint8_t kCtrlVersion = 2;
constexpr uint16_t kCtrlAttrFamilyId = 1;
constexpr uint16_t kCtrlAttrFamilyName = 2;
constexpr uint16_t kCtrlAttrVersion = 3;
constexpr uint16_t kCtrlAttrOps = 6;
constexpr uint16_t kCtrlAttrOpId = 1;

// include/uapi/linux/ethtool_netlink.h
constexpr std::string_view kFamilyName = "ethtool";
constexpr uint8_t kEthtoolVersion = 1;
constexpr uint16_t kAttrHeader = 1;  // ETHTOOL_A_*_HEADER is 1 in every message
constexpr uint16_t kHeaderDevIndex = 1;
constexpr uint16_t kHeaderDevName = 2;

struct Commands {
  uint8_t get, set, reply;
};
// ETHTOOL_MSG_{RINGS,CHANNELS,COALESCE}_{GET,SET} and their _GET_REPLY (5.7).
Commands commandsOf(Kind kind) {
  switch (kind) {
    case Kind::Rings: return {15, 16, 16};
    case Kind::Channels: return {17, 18, 18};
    case Kind::Coalesce: return {19, 20, 20};
  }
  return {0, 0, 0};
}

using T = AttrType;
// ETHTOOL_A_RINGS_*: RX_MAX..TX_MAX 2-5 and RX..TX 6-9 (5.7), RX_BUF_LEN 10, TCP_DATA_SPLIT 11,
// CQE_SIZE 12, TX_PUSH 13 (5.17/5.18), RX_PUSH 14 (6.3), TX_PUSH_BUF_LEN 15 / _MAX 16 (6.4),
// HDS_THRESH 17 / _MAX 18 (6.14).
constexpr std::array kRingAttributes = {
    Attribute{"rx", 6, T::U32, 2},           Attribute{"rx-mini", 7, T::U32, 3},
    Attribute{"rx-jumbo", 8, T::U32, 4},     Attribute{"tx", 9, T::U32, 5},
    Attribute{"rx-buf-len", 10, T::U32, 0},  Attribute{"tcp-data-split", 11, T::U8, 0},
    Attribute{"cqe-size", 12, T::U32, 0},    Attribute{"tx-push", 13, T::U8, 0},
    Attribute{"rx-push", 14, T::U8, 0},      Attribute{"tx-push-buf-len", 15, T::U32, 16},
    Attribute{"hds-thresh", 17, T::U32, 18},
};
// ETHTOOL_A_CHANNELS_*: RX_MAX..COMBINED_MAX 2-5, RX_COUNT..COMBINED_COUNT 6-9 (5.7).
constexpr std::array kChannelAttributes = {
    Attribute{"rx", 6, T::U32, 2},
    Attribute{"tx", 7, T::U32, 3},
    Attribute{"other", 8, T::U32, 4},
    Attribute{"combined", 9, T::U32, 5},
};
// ETHTOOL_A_COALESCE_*: 2-23 (5.7; USE_ADAPTIVE_RX/TX are u8), USE_CQE_MODE_TX 24 and _RX 25
// (5.15, u8), TX_AGGR_MAX_BYTES/MAX_FRAMES/TIME_USECS 26-28 (6.0). The RX/TX_PROFILE nests
// (6.10) are not settings iommud writes.
constexpr std::array kCoalesceAttributes = {
    Attribute{"rx-usecs", 2},
    Attribute{"rx-frames", 3},
    Attribute{"rx-usecs-irq", 4},
    Attribute{"rx-frames-irq", 5},
    Attribute{"tx-usecs", 6},
    Attribute{"tx-frames", 7},
    Attribute{"tx-usecs-irq", 8},
    Attribute{"tx-frames-irq", 9},
    Attribute{"stats-block-usecs", 10},
    Attribute{"adaptive-rx", 11, T::U8},
    Attribute{"adaptive-tx", 12, T::U8},
    Attribute{"pkt-rate-low", 13},
    Attribute{"rx-usecs-low", 14},
    Attribute{"rx-frames-low", 15},
    Attribute{"tx-usecs-low", 16},
    Attribute{"tx-frames-low", 17},
    Attribute{"pkt-rate-high", 18},
    Attribute{"rx-usecs-high", 19},
    Attribute{"rx-frames-high", 20},
    Attribute{"tx-usecs-high", 21},
    Attribute{"tx-frames-high", 22},
    Attribute{"sample-interval", 23},
    Attribute{"cqe-mode-tx", 24, T::U8},
    Attribute{"cqe-mode-rx", 25, T::U8},
    Attribute{"tx-aggr-max-bytes", 26},
    Attribute{"tx-aggr-max-frames", 27},
    Attribute{"tx-aggr-time-usecs", 28},
};

const Attribute* attributeByMaxId(Kind kind, uint16_t maxId) {
  if (maxId == 0) return nullptr;
  for (const auto& a : attributes(kind)) {
    if (a.maxId == maxId) return &a;
  }
  return nullptr;
}

const std::vector<core::EthtoolKey>& coreKeys(Kind kind) {
  switch (kind) {
    case Kind::Rings: return core::ringKeys();
    case Kind::Channels: return core::channelKeys();
    case Kind::Coalesce: break;
  }
  return core::coalesceKeys();
}

core::Error malformed(const std::string& what) {
  return core::Error{EPROTO, "", "malformed netlink message: " + what};
}

size_t align4(size_t n) {
  return (n + 3) & ~size_t{3};
}

uint16_t readU16(ByteView b, size_t at) {
  uint16_t v = 0;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

uint32_t readU32(ByteView b, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// A string attribute: up to its NUL, or all of it when the NUL is missing.
std::string readString(ByteView payload) {
  const auto* begin = reinterpret_cast<const char*>(payload.data());
  return {begin, std::find(begin, begin + payload.size(), '\0')};
}

// One attribute: its type without flags, its payload, and where its header starts in the message.
struct Attr {
  uint16_t type = 0;
  ByteView payload;
  size_t offset = 0;
};

// The attributes in `bytes`, which start at `base` in their message. The last one may lack its
// padding; anything else that does not add up is malformed.
core::Result<std::vector<Attr>> parseAttrs(ByteView bytes, size_t base) {
  std::vector<Attr> out;
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 4) return malformed("attribute header cut short at byte " + std::to_string(base + at));
    size_t len = readU16(bytes, at);
    if (len < 4 || len > bytes.size() - at) {
      return malformed("attribute length " + std::to_string(len) + " at byte " + std::to_string(base + at));
    }
    out.push_back(
        Attr{static_cast<uint16_t>(readU16(bytes, at + 2) & kNlaTypeMask), bytes.subspan(at + 4, len - 4), base + at});
    at += std::min(align4(len), bytes.size() - at);
  }
  return out;
}

core::Result<uint32_t> u32Of(const Attr& a, std::string_view what) {
  if (a.payload.size() != 4) {
    return malformed(std::string(what) + " has " + std::to_string(a.payload.size()) + " bytes, not 4");
  }
  return readU32(a.payload, 0);
}

core::Result<uint32_t> valueOf(const Attr& a, AttrType type, std::string_view name) {
  if (type == AttrType::U32) return u32Of(a, name);
  if (a.payload.size() != 1) {
    return malformed(std::string(name) + " has " + std::to_string(a.payload.size()) + " bytes, not 1");
  }
  return uint32_t{a.payload[0]};
}

// A generic netlink request: the headers, then attributes; the length is filled in by finish().
class Writer {
 public:
  Writer(uint16_t type, uint32_t seq, uint8_t cmd, uint8_t version) {
    bytes_.resize(kPayloadStart);
    const uint16_t flags = kNlmFRequest | kNlmFAck;
    std::memcpy(bytes_.data() + 4, &type, 2);
    std::memcpy(bytes_.data() + 6, &flags, 2);
    std::memcpy(bytes_.data() + 8, &seq, 4);
    bytes_[16] = cmd;
    bytes_[17] = version;  // the port id (12-15) and the genl reserved field stay 0
  }

  void put(uint16_t type, const void* data, size_t size) {
    const auto len = static_cast<uint16_t>(4 + size);
    const size_t at = bytes_.size();
    bytes_.resize(at + align4(len));
    std::memcpy(bytes_.data() + at, &len, 2);
    std::memcpy(bytes_.data() + at + 2, &type, 2);
    if (size > 0) std::memcpy(bytes_.data() + at + 4, data, size);
  }
  void putU32(uint16_t type, uint32_t value) { put(type, &value, sizeof value); }
  void putU8(uint16_t type, uint8_t value) { put(type, &value, sizeof value); }

  size_t beginNest(uint16_t type) {
    const size_t at = bytes_.size();
    put(type | kNlaFNested, nullptr, 0);
    return at;
  }
  void endNest(size_t at) {
    const auto len = static_cast<uint16_t>(bytes_.size() - at);
    std::memcpy(bytes_.data() + at, &len, 2);
  }

  Bytes finish() && {
    const auto len = static_cast<uint32_t>(bytes_.size());
    std::memcpy(bytes_.data(), &len, 4);
    return std::move(bytes_);
  }

 private:
  Bytes bytes_;
};

// Every ethtool request starts with the header nest naming the device by index.
Writer ethtoolRequest(uint16_t family, uint8_t cmd, uint32_t ifindex, uint32_t seq) {
  Writer w(family, seq, cmd, kEthtoolVersion);
  size_t header = w.beginNest(kAttrHeader);
  w.putU32(kHeaderDevIndex, ifindex);
  w.endNest(header);
  return w;
}

// The generic netlink command of a message, after checking there is a genl header.
core::Result<uint8_t> genlCommand(const Message& m) {
  if (m.bytes.size() < kPayloadStart) return malformed("no generic netlink header");
  return m.bytes[kNlmsgHeaderSize];
}

// The top-level attribute of a request that starts at or contains `offset`.
std::optional<Attr> requestAttrAt(ByteView request, uint32_t offset) {
  if (request.size() < kPayloadStart) return std::nullopt;
  auto attrs = parseAttrs(request.subspan(kPayloadStart), kPayloadStart);
  if (!attrs) return std::nullopt;
  for (const auto& a : *attrs) {
    if (offset >= a.offset && offset < a.offset + 4 + a.payload.size()) return a;
  }
  return std::nullopt;
}

std::string nameOf(Kind kind, const Attr& a) {
  if (a.type == kAttrHeader) return "header";
  if (const auto* known = attributeById(kind, a.type)) return std::string(known->name);
  return "attribute " + std::to_string(a.type);
}

std::string_view noun(Kind kind) {
  switch (kind) {
    case Kind::Rings: return "ring";
    case Kind::Channels: return "channel";
    case Kind::Coalesce: break;
  }
  return "coalescing";
}

// The first attribute of a request that the running kernel is older than, with the version it needs.
std::optional<std::pair<std::string, core::KernelVersion>> newerThan(Kind kind, ByteView request,
                                                                     const core::KernelVersion& kernel) {
  if (request.size() < kPayloadStart) return std::nullopt;
  auto attrs = parseAttrs(request.subspan(kPayloadStart), kPayloadStart);
  if (!attrs) return std::nullopt;
  for (const auto& a : *attrs) {
    const auto* attr = attributeById(kind, a.type);
    if (attr == nullptr) continue;
    const auto* key = core::findEthtoolKey(coreKeys(kind), attr->name);
    if (key != nullptr && kernel < key->since) return std::pair{std::string(attr->name), key->since};
  }
  return std::nullopt;
}

// "6.3" for a release, "6.1.192" for a stable one.
std::string versionText(const core::KernelVersion& v) {
  return v.patch == 0 ? std::to_string(v.major) + "." + std::to_string(v.minor) : v.str();
}

std::string thisKernel(const std::optional<core::KernelVersion>& kernel) {
  return kernel ? "this kernel (" + versionText(*kernel) + ")" : std::string("this kernel");
}

// What EINVAL means here. ethtool's strict policies reject an attribute id above the kernel's
// maximum with "Unknown attribute type" at its offset (lib/nlattr.c, NL_VALIDATE_MAXTYPE), so an
// attribute added after the running kernel is told from the kernel's own words; without them the
// attribute's version (core::ringKeys() and siblings) against the running kernel is the hint.
std::string invalidMeaning(Kind kind, ByteView request, const Ack& ack, const std::optional<Attr>& culprit,
                           const std::optional<core::KernelVersion>& kernel) {
  const std::string name = culprit ? nameOf(kind, *culprit) : std::string();
  const auto* attr = culprit ? attributeById(kind, culprit->type) : nullptr;
  if (ack.message.find("nknown attribute") != std::string::npos) {
    const auto* key = attr != nullptr ? core::findEthtoolKey(coreKeys(kind), attr->name) : nullptr;
    if (key == nullptr) return thisKernel(kernel) + " does not know " + (name.empty() ? "an attribute" : name);
    return thisKernel(kernel) + " does not know " + name + ", added in Linux " + versionText(key->since);
  }
  if (ack.message.find("exceeds") != std::string::npos) {
    if (attr == nullptr) return "a value exceeds the device's maximum";
    auto value = valueOf(*culprit, attr->type, attr->name);
    return name + (value ? " " + std::to_string(*value) : std::string()) + " exceeds the device's maximum";
  }
  if (ack.message.empty() && kernel) {
    if (auto newer = newerThan(kind, request, *kernel)) {
      return thisKernel(kernel) + " probably does not know " + newer->first + ", added in Linux " +
             versionText(newer->second);
    }
  }
  return "the kernel or the driver refused the values";
}

}  // namespace

std::string_view toString(Kind kind) {
  return core::nameOf(kKindNames, kind);
}

std::span<const Attribute> attributes(Kind kind) {
  switch (kind) {
    case Kind::Rings: return kRingAttributes;
    case Kind::Channels: return kChannelAttributes;
    case Kind::Coalesce: break;
  }
  return kCoalesceAttributes;
}

const Attribute* findAttribute(Kind kind, std::string_view name) {
  for (const auto& a : attributes(kind)) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const Attribute* attributeById(Kind kind, uint16_t id) {
  for (const auto& a : attributes(kind)) {
    if (a.id == id) return &a;
  }
  return nullptr;
}

core::Result<std::vector<Message>> splitMessages(ByteView datagram) {
  std::vector<Message> out;
  size_t at = 0;
  while (at < datagram.size()) {
    if (datagram.size() - at < kNlmsgHeaderSize) {
      return malformed("message header cut short at byte " + std::to_string(at));
    }
    size_t len = readU32(datagram, at);
    if (len < kNlmsgHeaderSize || len > datagram.size() - at) {
      return malformed("message length " + std::to_string(len) + " at byte " + std::to_string(at));
    }
    out.push_back(Message{readU16(datagram, at + 4), readU16(datagram, at + 6), readU32(datagram, at + 8),
                          readU32(datagram, at + 12), datagram.subspan(at, len)});
    at += std::min(align4(len), datagram.size() - at);
  }
  return out;
}

bool Family::supports(Kind kind) const {
  auto c = commandsOf(kind);
  return std::find(commands.begin(), commands.end(), c.get) != commands.end() &&
         std::find(commands.begin(), commands.end(), c.set) != commands.end();
}

Bytes encodeGetFamily(uint32_t seq) {
  Writer w(kGenlIdCtrl, seq, kCtrlCmdGetFamily, kCtrlVersion);
  std::string name(kFamilyName);
  w.put(kCtrlAttrFamilyName, name.c_str(), name.size() + 1);
  return std::move(w).finish();
}

namespace {

// CTRL_ATTR_OPS: a list of nests, one per command, each with CTRL_ATTR_OP_ID and CTRL_ATTR_OP_FLAGS.
core::Result<std::vector<uint32_t>> commandIds(const Attr& opsAttr) {
  auto ops = parseAttrs(opsAttr.payload, opsAttr.offset + 4);
  if (!ops) return ops.error();
  std::vector<uint32_t> ids;
  for (const auto& op : *ops) {
    auto fields = parseAttrs(op.payload, op.offset + 4);
    if (!fields) return fields.error();
    for (const auto& f : *fields) {
      if (f.type != kCtrlAttrOpId) continue;
      auto id = u32Of(f, "command id");
      if (!id) return id.error();
      ids.push_back(*id);
    }
  }
  return ids;
}

// ETHTOOL_A_*_HEADER: the device's index and name.
core::Result<core::Done> readHeader(const Attr& headerAttr, Reply& reply) {
  auto fields = parseAttrs(headerAttr.payload, headerAttr.offset + 4);
  if (!fields) return fields.error();
  for (const auto& f : *fields) {
    if (f.type == kHeaderDevIndex) {
      auto index = u32Of(f, "device index");
      if (!index) return index.error();
      reply.ifindex = *index;
    } else if (f.type == kHeaderDevName) {
      reply.ifname = readString(f.payload);
    }
  }
  return core::Done{};
}

}  // namespace

core::Result<Family> decodeFamily(const Message& message) {
  auto cmd = genlCommand(message);
  if (!cmd) return cmd.error();
  if (message.type != kGenlIdCtrl || *cmd != kCtrlCmdNewFamily) {
    return malformed("not a family description (type " + std::to_string(message.type) + ", command " +
                     std::to_string(*cmd) + ")");
  }
  auto attrs = parseAttrs(message.bytes.subspan(kPayloadStart), kPayloadStart);
  if (!attrs) return attrs.error();
  Family family;
  std::optional<std::string> name;
  for (const auto& a : *attrs) {
    if (a.type == kCtrlAttrFamilyId) {
      if (a.payload.size() != 2) return malformed("family id of " + std::to_string(a.payload.size()) + " bytes");
      family.id = readU16(a.payload, 0);
    } else if (a.type == kCtrlAttrFamilyName) {
      name = readString(a.payload);
    } else if (a.type == kCtrlAttrVersion) {
      auto v = u32Of(a, "family version");
      if (!v) return v.error();
      family.version = *v;
    } else if (a.type == kCtrlAttrOps) {
      auto ids = commandIds(a);
      if (!ids) return ids.error();
      family.commands.insert(family.commands.end(), ids->begin(), ids->end());
    }
  }
  if (name != kFamilyName) return malformed("the family is " + name.value_or("none") + ", not ethtool");
  if (family.id == 0) return malformed("family description without an id");
  return family;
}

Bytes encodeGet(uint16_t family, Kind kind, uint32_t ifindex, uint32_t seq) {
  return ethtoolRequest(family, commandsOf(kind).get, ifindex, seq).finish();
}

core::Result<Bytes> encodeSet(uint16_t family, Kind kind, uint32_t ifindex,
                              const std::map<std::string, uint32_t>& values, uint32_t seq) {
  Writer w = ethtoolRequest(family, commandsOf(kind).set, ifindex, seq);
  for (const auto& [name, value] : values) {
    const auto* attr = findAttribute(kind, name);
    if (attr == nullptr) {
      return core::Error{EINVAL, "", "ethtool " + std::string(toString(kind)) + " has no setting \"" + name + "\""};
    }
    if (attr->type == AttrType::U32) {
      w.putU32(attr->id, value);
    } else if (value <= 0xff) {
      w.putU8(attr->id, static_cast<uint8_t>(value));
    } else {
      return core::Error{
          EINVAL, "",
          "ethtool " + std::string(toString(kind)) + " " + name + " takes 0 to 255, not " + std::to_string(value)};
    }
  }
  return std::move(w).finish();
}

core::Result<Reply> decodeReply(Kind kind, const Message& message) {
  auto cmd = genlCommand(message);
  if (!cmd) return cmd.error();
  if (*cmd != commandsOf(kind).reply) {
    return malformed("command " + std::to_string(*cmd) + " is not a " + std::string(toString(kind)) + " reply");
  }
  auto attrs = parseAttrs(message.bytes.subspan(kPayloadStart), kPayloadStart);
  if (!attrs) return attrs.error();
  Reply reply;
  bool header = false;
  for (const auto& a : *attrs) {
    if (a.type == kAttrHeader) {
      if (auto read = readHeader(a, reply); !read) return read.error();
      header = true;
    } else if (const auto* attr = attributeById(kind, a.type)) {
      auto value = valueOf(a, attr->type, attr->name);
      if (!value) return value.error();
      reply.values[std::string(attr->name)] = *value;
    } else if (const auto* limited = attributeByMaxId(kind, a.type)) {
      auto value = u32Of(a, std::string("maximum of ") + std::string(limited->name));
      if (!value) return value.error();
      reply.maxima[std::string(limited->name)] = *value;
    }
  }
  if (!header) return malformed(std::string(toString(kind)) + " reply without a header");
  return reply;
}

void store(core::EthtoolState& state, Kind kind, Reply reply) {
  switch (kind) {
    case Kind::Rings:
      state.rings = std::move(reply.values);
      state.ringsMax = std::move(reply.maxima);
      return;
    case Kind::Channels:
      state.channels = std::move(reply.values);
      state.channelsMax = std::move(reply.maxima);
      return;
    case Kind::Coalesce: state.coalesce = std::move(reply.values); return;
  }
}

core::Result<Ack> decodeAck(const Message& message) {
  if (message.type != kNlmsgError) return malformed("type " + std::to_string(message.type) + " is not an error");
  ByteView payload = message.bytes.subspan(kNlmsgHeaderSize);
  // struct nlmsgerr: the (negative) errno and the request's header.
  if (payload.size() < 4 + kNlmsgHeaderSize) return malformed("error message cut short");
  int32_t code = 0;
  std::memcpy(&code, payload.data(), sizeof code);
  if (code > 0 || code < -kMaxErrno) return malformed("error code " + std::to_string(code));
  Ack ack;
  ack.error = -code;
  size_t at = 4 + kNlmsgHeaderSize;
  // Without NETLINK_CAP_ACK the whole request follows its header. Kernels before 4.12 capped
  // without saying so (no NLM_F_CAPPED), and none echo the request in a success ack.
  if ((message.flags & kNlmFCapped) == 0 && payload.size() > at) {
    size_t requestLen = readU32(payload, 4);
    if (requestLen < kNlmsgHeaderSize || requestLen - kNlmsgHeaderSize > payload.size() - at) {
      return malformed("echoed request of " + std::to_string(requestLen) + " bytes");
    }
    at += std::min(align4(requestLen) - kNlmsgHeaderSize, payload.size() - at);
  }
  if ((message.flags & kNlmFAckTlvs) == 0) return ack;
  auto attrs = parseAttrs(payload.subspan(at), kNlmsgHeaderSize + at);
  if (!attrs) return attrs.error();
  for (const auto& a : *attrs) {
    if (a.type == kNlmsgerrAttrMsg) {
      ack.message = readString(a.payload);
    } else if (a.type == kNlmsgerrAttrOffs) {
      auto offset = u32Of(a, "error offset");
      if (!offset) return offset.error();
      ack.offset = *offset;
    } else if (a.type == kNlmsgerrAttrMissType) {
      auto missing = u32Of(a, "missing attribute");
      if (!missing) return missing.error();
      ack.missingType = *missing;
    }
  }
  return ack;
}

std::optional<std::string> attributeAt(Kind kind, ByteView request, uint32_t offset) {
  auto a = requestAttrAt(request, offset);
  if (!a) return std::nullopt;
  return nameOf(kind, *a);
}

std::string describeRequest(Kind kind, Op op, std::string_view ifname) {
  return std::string(noun(kind)) + (op == Op::Read ? " read on " : " change on ") + std::string(ifname);
}

core::Error describeFailure(Kind kind, Op op, std::string_view ifname, ByteView request, const Ack& ack,
                            std::optional<core::KernelVersion> kernel) {
  std::optional<Attr> culprit;
  if (ack.offset) culprit = requestAttrAt(request, *ack.offset);
  std::string meaning;
  switch (ack.error) {
    case EOPNOTSUPP:
      meaning = culprit && culprit->type != kAttrHeader ? nameOf(kind, *culprit) + " is not supported by the driver"
                                                        : "not supported by the driver";
      break;
    case EINVAL: meaning = invalidMeaning(kind, request, ack, culprit, kernel); break;
    case EPERM: meaning = "needs CAP_NET_ADMIN"; break;
    case ENODEV: meaning = "the interface is gone"; break;
    case EBUSY: meaning = "the device is busy (an XDP program or AF_XDP socket may hold its queues)"; break;
    default: break;
  }
  std::string details = std::strerror(ack.error);
  if (!ack.message.empty()) details += "; kernel: " + ack.message;
  if (culprit) details += (ack.message.empty() ? "; at " : ", at ") + nameOf(kind, *culprit);
  if (ack.missingType) details += "; missing attribute " + std::to_string(*ack.missingType);
  std::string text = describeRequest(kind, op, ifname);
  text += meaning.empty() ? ": " + details : ": " + meaning + " (" + details + ")";
  return core::Error{ack.error, "", text};
}

core::Result<uint32_t> resolve(const core::EthtoolState& state, Kind kind, std::string_view name,
                               const core::Amount& amount) {
  if (amount.value) return *amount.value;
  const std::string what = std::string(toString(kind)) + " " + std::string(name);
  if (kind == Kind::Coalesce) return core::Error{EINVAL, "", what + " has no maximum"};
  if (!state.read) return core::Error{0, "", what + ": the maximum is not known (ethtool settings not read)"};
  const auto& maxima = kind == Kind::Rings ? state.ringsMax : state.channelsMax;
  auto it = maxima.find(std::string(name));
  if (it == maxima.end()) return core::Error{EOPNOTSUPP, "", what + ": the device reports no maximum"};
  return it->second;
}

core::Result<std::map<std::string, uint32_t>> resolve(const core::EthtoolState& state, Kind kind,
                                                      const std::map<std::string, core::Amount>& amounts) {
  std::map<std::string, uint32_t> out;
  for (const auto& [name, amount] : amounts) {
    auto value = resolve(state, kind, name, amount);
    if (!value) return value.error();
    out[name] = *value;
  }
  return out;
}

}  // namespace iommud::adapters::ethtool
