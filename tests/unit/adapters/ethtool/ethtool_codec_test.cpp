#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "adapters/ethtool/codec.hpp"
#include "core/text.hpp"

namespace ethtool_codec_test {

using namespace iommud::adapters::ethtool;
using iommud::core::Amount;
using iommud::core::EthtoolKey;
using iommud::core::EthtoolState;
using iommud::core::KernelVersion;

// Netlink integers are in host byte order; the vectors below are from (and for) little-endian x86.
static_assert(std::endian::native == std::endian::little);

// "48 00 00 00 ..." as bytes: how the captures below were printed.
Bytes hex(std::string_view text) {
  Bytes out;
  for (auto w : iommud::core::words(text)) out.push_back(static_cast<uint8_t>(std::stoul(std::string(w), nullptr, 16)));
  return out;
}

// The one message of a datagram; `bytes` must outlive it.
Message only(const Bytes& bytes) {
  auto messages = splitMessages(bytes);
  EXPECT_TRUE(messages.ok()) << (messages.ok() ? "" : messages.error().message);
  if (!messages.ok() || messages->size() != 1) return {};
  return messages->front();
}

// Hand assembly after include/uapi/linux/netlink.h and genetlink.h, independent of the encoder:
// struct nlattr {u16 nla_len; u16 nla_type;} padded to 4, struct nlmsghdr {u32 len; u16 type;
// u16 flags; u32 seq; u32 pid;}, struct genlmsghdr {u8 cmd; u8 version; u16 reserved;}.
Bytes nla(uint16_t type, const Bytes& payload) {
  const size_t len = 4 + payload.size();
  // Sized once, zeros for the padding: appending the payload to the 4 header bytes made GCC 12 at
  // -O3 warn that the copy reads out of bounds (-Warray-bounds, a false positive of its inlining).
  Bytes out((len + 3) / 4 * 4, 0);
  out[0] = static_cast<uint8_t>(len & 0xff);
  out[1] = static_cast<uint8_t>(len >> 8);
  out[2] = static_cast<uint8_t>(type & 0xff);
  out[3] = static_cast<uint8_t>(type >> 8);
  std::copy(payload.begin(), payload.end(), out.begin() + 4);
  return out;
}
Bytes u32(uint32_t v) {
  return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 24)};
}
Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes genl(uint16_t type, uint8_t cmd, const Bytes& attrs, uint16_t flags = 0, uint32_t seq = 100) {
  Bytes body = Bytes{cmd, 1, 0, 0} + attrs;
  Bytes head = u32(static_cast<uint32_t>(16 + body.size())) +
               Bytes{static_cast<uint8_t>(type), static_cast<uint8_t>(type >> 8), static_cast<uint8_t>(flags),
                     static_cast<uint8_t>(flags >> 8)} +
               u32(seq) + u32(0);
  return head + body;
}
// ETHTOOL_A_*_HEADER (1, NLA_F_NESTED) with DEV_INDEX (1) and DEV_NAME (2).
Bytes header(uint32_t ifindex, const std::string& name) {
  return nla(0x8001, nla(1, u32(ifindex)) + nla(2, Bytes(name.begin(), name.end()) + Bytes{0}));
}

// Captured on this project's development machine (Linux 6.18, x86_64) with a hand-written
// Python client: CTRL_CMD_GETFAMILY "ethtool" and the kernel's answer (family id 21).
const char* const kFamilyReply =
    "48 04 00 00 10 00 00 00 01 00 00 00 79 76 00 00 01 02 00 00 0c 00 02 00 65 74 68 74 6f 6f 6c 00 06 00 01 00 "
    "15 00 00 00 08 00 03 00 01 00 00 00 08 00 04 00 00 00 00 00 08 00 05 00 00 00 00 00 ec 03 06 00 14 00 01 00 "
    "08 00 01 00 01 00 00 00 08 00 02 00 0e 00 00 00 14 00 02 00 08 00 01 00 02 00 00 00 08 00 02 00 0e 00 00 00 "
    "14 00 03 00 08 00 01 00 03 00 00 00 08 00 02 00 1a 00 00 00 14 00 04 00 08 00 01 00 04 00 00 00 08 00 02 00 "
    "0e 00 00 00 14 00 05 00 08 00 01 00 05 00 00 00 08 00 02 00 1a 00 00 00 14 00 06 00 08 00 01 00 06 00 00 00 "
    "08 00 02 00 0e 00 00 00 14 00 07 00 08 00 01 00 07 00 00 00 08 00 02 00 0e 00 00 00 14 00 08 00 08 00 01 00 "
    "08 00 00 00 08 00 02 00 1a 00 00 00 14 00 09 00 08 00 01 00 09 00 00 00 08 00 02 00 1e 00 00 00 14 00 0a 00 "
    "08 00 01 00 0a 00 00 00 08 00 02 00 1a 00 00 00 14 00 0b 00 08 00 01 00 0b 00 00 00 08 00 02 00 0e 00 00 00 "
    "14 00 0c 00 08 00 01 00 0c 00 00 00 08 00 02 00 1a 00 00 00 14 00 0d 00 08 00 01 00 0d 00 00 00 08 00 02 00 "
    "0e 00 00 00 14 00 0e 00 08 00 01 00 0e 00 00 00 08 00 02 00 1a 00 00 00 14 00 0f 00 08 00 01 00 0f 00 00 00 "
    "08 00 02 00 0e 00 00 00 14 00 10 00 08 00 01 00 10 00 00 00 08 00 02 00 1a 00 00 00 14 00 11 00 08 00 01 00 "
    "11 00 00 00 08 00 02 00 0e 00 00 00 14 00 12 00 08 00 01 00 12 00 00 00 08 00 02 00 1a 00 00 00 14 00 13 00 "
    "08 00 01 00 13 00 00 00 08 00 02 00 0e 00 00 00 14 00 14 00 08 00 01 00 14 00 00 00 08 00 02 00 1a 00 00 00 "
    "14 00 15 00 08 00 01 00 15 00 00 00 08 00 02 00 0e 00 00 00 14 00 16 00 08 00 01 00 16 00 00 00 08 00 02 00 "
    "1a 00 00 00 14 00 17 00 08 00 01 00 17 00 00 00 08 00 02 00 0e 00 00 00 14 00 18 00 08 00 01 00 18 00 00 00 "
    "08 00 02 00 1a 00 00 00 14 00 19 00 08 00 01 00 19 00 00 00 08 00 02 00 0e 00 00 00 14 00 1a 00 08 00 01 00 "
    "1a 00 00 00 08 00 02 00 1a 00 00 00 14 00 1b 00 08 00 01 00 1b 00 00 00 08 00 02 00 1a 00 00 00 14 00 1c 00 "
    "08 00 01 00 1c 00 00 00 08 00 02 00 0e 00 00 00 14 00 1d 00 08 00 01 00 1d 00 00 00 08 00 02 00 0e 00 00 00 "
    "14 00 1e 00 08 00 01 00 1e 00 00 00 08 00 02 00 1a 00 00 00 14 00 1f 00 08 00 01 00 1f 00 00 00 08 00 02 00 "
    "1e 00 00 00 14 00 20 00 08 00 01 00 20 00 00 00 08 00 02 00 0e 00 00 00 14 00 21 00 08 00 01 00 21 00 00 00 "
    "08 00 02 00 0e 00 00 00 14 00 22 00 08 00 01 00 22 00 00 00 08 00 02 00 0e 00 00 00 14 00 23 00 08 00 01 00 "
    "23 00 00 00 08 00 02 00 1a 00 00 00 14 00 24 00 08 00 01 00 24 00 00 00 08 00 02 00 0e 00 00 00 14 00 25 00 "
    "08 00 01 00 25 00 00 00 08 00 02 00 1a 00 00 00 14 00 26 00 08 00 01 00 26 00 00 00 08 00 02 00 0e 00 00 00 "
    "14 00 27 00 08 00 01 00 27 00 00 00 08 00 02 00 0e 00 00 00 14 00 28 00 08 00 01 00 28 00 00 00 08 00 02 00 "
    "1a 00 00 00 14 00 29 00 08 00 01 00 29 00 00 00 08 00 02 00 0e 00 00 00 14 00 2a 00 08 00 01 00 2a 00 00 00 "
    "08 00 02 00 0e 00 00 00 14 00 2b 00 08 00 01 00 2b 00 00 00 08 00 02 00 1a 00 00 00 14 00 2c 00 08 00 01 00 "
    "2c 00 00 00 08 00 02 00 1a 00 00 00 14 00 2d 00 08 00 01 00 2d 00 00 00 08 00 02 00 0e 00 00 00 14 00 2e 00 "
    "08 00 01 00 2e 00 00 00 08 00 02 00 0e 00 00 00 14 00 2f 00 08 00 01 00 2f 00 00 00 08 00 02 00 1a 00 00 00 "
    "14 00 30 00 08 00 01 00 30 00 00 00 08 00 02 00 1a 00 00 00 14 00 31 00 08 00 01 00 31 00 00 00 08 00 02 00 "
    "1a 00 00 00 14 00 32 00 08 00 01 00 32 00 00 00 08 00 02 00 1a 00 00 00 1c 00 07 00 18 00 01 00 08 00 02 00 "
    "06 00 00 00 0c 00 01 00 6d 6f 6e 69 74 6f 72 00";

// ETHTOOL_MSG_CHANNELS_GET_REPLY for a veth "vb" (ifindex 2) made with numrx/numtxqueues 4.
const char* const kVethChannelsReply =
    "48 00 00 00 15 00 00 00 64 00 00 00 41 75 00 00 12 01 00 00 14 00 01 80 08 00 01 00 02 00 00 00 07 00 02 00 "
    "76 62 00 00 08 00 02 00 04 00 00 00 08 00 06 00 04 00 00 00 08 00 03 00 04 00 00 00 08 00 07 00 04 00 00 00";
// RINGS, CHANNELS and COALESCE_GET_REPLY of a virtio_net NIC "eth0" (ifindex 4): 256/256 rings,
// one combined channel, TX_PUSH and RX_PUSH as u8 (the kernel always sends those two).
const char* const kVirtioRingsReply =
    "5c 00 00 00 15 00 00 00 64 00 00 00 07 76 00 00 10 01 00 00 18 00 01 80 08 00 01 00 04 00 00 00 09 00 02 00 "
    "65 74 68 30 00 00 00 00 08 00 02 00 00 01 00 00 08 00 06 00 00 01 00 00 08 00 05 00 00 01 00 00 08 00 09 00 "
    "00 01 00 00 05 00 0d 00 00 00 00 00 05 00 0e 00 00 00 00 00";
const char* const kVirtioChannelsReply =
    "3c 00 00 00 15 00 00 00 64 00 00 00 07 76 00 00 12 01 00 00 18 00 01 80 08 00 01 00 04 00 00 00 09 00 02 00 "
    "65 74 68 30 00 00 00 00 08 00 05 00 01 00 00 00 08 00 09 00 01 00 00 00";
const char* const kVirtioCoalesceReply =
    "54 00 00 00 15 00 00 00 64 00 00 00 07 76 00 00 14 01 00 00 18 00 01 80 08 00 01 00 04 00 00 00 09 00 02 00 "
    "65 74 68 30 00 00 00 00 08 00 02 00 00 00 00 00 08 00 03 00 01 00 00 00 08 00 06 00 00 00 00 00 08 00 07 00 "
    "01 00 00 00 05 00 0b 00 00 00 00 00";

// NLMSG_ERROR answers of the same kernel, with NETLINK_EXT_ACK and NETLINK_CAP_ACK.
// RINGS_GET on a veth: EOPNOTSUPP, no extended ack (NLM_F_CAPPED only).
const char* const kRingsGetNotSupported =
    "24 00 00 00 02 00 00 01 64 00 00 00 41 75 00 00 a1 ff ff ff 20 00 00 00 15 00 01 00 64 00 00 00 00 00 00 00";
// CHANNELS_SET combined 1 on a veth (no combined channels): EINVAL, extack at offset 32.
const char* const kChannelsSetCombined1 =
    "28 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00 12 01 00 00 0c 00 01 80 "
    "08 00 01 00 02 00 00 00 08 00 09 00 01 00 00 00";
const char* const kChannelsExceedMaximum =
    "58 00 00 00 02 00 00 03 64 00 00 00 41 75 00 00 ea ff ff ff 28 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00 "
    "2c 00 01 00 72 65 71 75 65 73 74 65 64 20 63 68 61 6e 6e 65 6c 20 63 6f 75 6e 74 20 65 78 63 65 65 64 73 20 "
    "6d 61 78 69 6d 75 6d 00 08 00 02 00 20 00 00 00";
// CHANNELS_SET with attribute 10, which no kernel has: the strict policy's answer.
const char* const kUnknownAttribute =
    "48 00 00 00 02 00 00 03 64 00 00 00 41 75 00 00 ea ff ff ff 28 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00 "
    "1b 00 01 00 55 6e 6b 6e 6f 77 6e 20 61 74 74 72 69 62 75 74 65 20 74 79 70 65 00 00 08 00 02 00 20 00 00 00";
// RINGS_SET rx-buf-len 2048 on a veth.
const char* const kRingsSetRxBufLen =
    "28 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00 10 01 00 00 0c 00 01 80 "
    "08 00 01 00 02 00 00 00 08 00 0a 00 00 08 00 00";
const char* const kRxBufLenNotSupported =
    "54 00 00 00 02 00 00 03 64 00 00 00 41 75 00 00 a1 ff ff ff 28 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00 "
    "25 00 01 00 73 65 74 74 69 6e 67 20 72 78 20 62 75 66 20 6c 65 6e 20 6e 6f 74 20 73 75 70 70 6f 72 74 65 64 "
    "00 00 00 00 08 00 02 00 20 00 00 00";
// CHANNELS_SET rx 2 tx 3 accepted: the ack.
const char* const kChannelsSetAck =
    "24 00 00 00 02 00 00 01 64 00 00 00 41 75 00 00 00 00 00 00 30 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00";
// CHANNELS_GET for ifindex 999: ENODEV, pointing into the header nest (offset 24).
const char* const kNoDevice =
    "4c 00 00 00 02 00 00 03 64 00 00 00 a1 75 00 00 ed ff ff ff 20 00 00 00 15 00 01 00 64 00 00 00 00 00 00 00 "
    "1e 00 01 00 6e 6f 20 64 65 76 69 63 65 20 6d 61 74 63 68 65 73 20 69 66 69 6e 64 65 78 00 00 00 08 00 02 00 "
    "18 00 00 00";
// CHANNELS_SET as an unprivileged user: EPERM.
const char* const kNotPermitted =
    "24 00 00 00 02 00 00 01 64 00 00 00 31 76 00 00 ff ff ff ff 28 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00";
// CHANNELS_SET combined 7 without NETLINK_CAP_ACK: the request is echoed before the TLVs.
const char* const kUncappedExceedMaximum =
    "70 00 00 00 02 00 00 02 64 00 00 00 50 76 00 00 ea ff ff ff 28 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00 "
    "12 01 00 00 0c 00 01 80 08 00 01 00 03 00 00 00 08 00 09 00 07 00 00 00 2c 00 01 00 72 65 71 75 65 73 74 65 "
    "64 20 63 68 61 6e 6e 65 6c 20 63 6f 75 6e 74 20 65 78 63 65 65 64 73 20 6d 61 78 69 6d 75 6d 00 08 00 02 00 "
    "20 00 00 00";

const std::vector<EthtoolKey>& coreKeys(Kind kind) {
  if (kind == Kind::Rings) return iommud::core::ringKeys();
  if (kind == Kind::Channels) return iommud::core::channelKeys();
  return iommud::core::coalesceKeys();
}

constexpr std::array kKinds = {Kind::Rings, Kind::Channels, Kind::Coalesce};

TEST(EthtoolAttributes, CoverEveryKeyOfThePolicyLanguageWithItsType) {
  for (Kind kind : kKinds) {
    SCOPED_TRACE(std::string(toString(kind)));
    EXPECT_EQ(attributes(kind).size(), coreKeys(kind).size());
    for (const auto& key : coreKeys(kind)) {
      const Attribute* a = findAttribute(kind, key.name);
      ASSERT_NE(a, nullptr) << key.name;
      bool oneByte = key.type == EthtoolKey::Type::Bool || key.type == EthtoolKey::Type::TcpDataSplit;
      EXPECT_EQ(a->type == AttrType::U8, oneByte) << key.name;
      EXPECT_EQ(a->maxId != 0, key.type == EthtoolKey::Type::CountOrMax) << key.name;
      EXPECT_EQ(attributeById(kind, a->id), a);
    }
  }
}

TEST(EthtoolAttributes, IdsFollowTheUapiHeader) {
  EXPECT_EQ(findAttribute(Kind::Rings, "rx")->maxId, 2);
  EXPECT_EQ(findAttribute(Kind::Rings, "tx")->id, 9);
  EXPECT_EQ(findAttribute(Kind::Rings, "tcp-data-split")->id, 11);
  EXPECT_EQ(findAttribute(Kind::Rings, "rx-push")->id, 14);
  EXPECT_EQ(findAttribute(Kind::Rings, "tx-push-buf-len")->maxId, 16);
  EXPECT_EQ(findAttribute(Kind::Rings, "hds-thresh")->id, 17);
  EXPECT_EQ(findAttribute(Kind::Rings, "hds-thresh")->maxId, 18);
  EXPECT_EQ(findAttribute(Kind::Channels, "combined")->id, 9);
  EXPECT_EQ(findAttribute(Kind::Channels, "combined")->maxId, 5);
  EXPECT_EQ(findAttribute(Kind::Coalesce, "sample-interval")->id, 23);
  EXPECT_EQ(findAttribute(Kind::Coalesce, "cqe-mode-tx")->id, 24);
  EXPECT_EQ(findAttribute(Kind::Coalesce, "cqe-mode-rx")->id, 25);
  EXPECT_EQ(findAttribute(Kind::Coalesce, "tx-aggr-max-bytes")->id, 26);
  EXPECT_EQ(findAttribute(Kind::Coalesce, "tx-aggr-time-usecs")->id, 28);
  EXPECT_EQ(findAttribute(Kind::Coalesce, "rx-usecs-irq"), attributeById(Kind::Coalesce, 4));
  EXPECT_EQ(findAttribute(Kind::Rings, "rx-max"), nullptr);
}

TEST(EthtoolEncode, GetFamilyIsTheControlRequestForEthtool) {
  const Bytes want = {
      0x20, 0x00, 0x00, 0x00,  // nlmsg_len 32
      0x10, 0x00,              // GENL_ID_CTRL
      0x05, 0x00,              // NLM_F_REQUEST | NLM_F_ACK
      0x07, 0x00, 0x00, 0x00,  // seq
      0x00, 0x00, 0x00, 0x00,  // port id: the kernel fills it in
      0x03, 0x02, 0x00, 0x00,  // CTRL_CMD_GETFAMILY, version 2
      0x0c, 0x00, 0x02, 0x00,  // CTRL_ATTR_FAMILY_NAME, 12 bytes
      'e',  't',  'h',  't',  'o', 'o', 'l', 0x00,
  };
  EXPECT_EQ(encodeGetFamily(7), want);
}

TEST(EthtoolEncode, GetIsTheHeaderNestWithTheDeviceIndex) {
  const Bytes want = {
      0x20, 0x00, 0x00, 0x00, 0x15, 0x00, 0x05, 0x00, 0x64, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x01, 0x00, 0x00,  // ETHTOOL_MSG_CHANNELS_GET, ETHTOOL_GENL_VERSION
      0x0c, 0x00, 0x01, 0x80,                                      // ETHTOOL_A_CHANNELS_HEADER | NLA_F_NESTED
      0x08, 0x00, 0x01, 0x00,                                      // ETHTOOL_A_HEADER_DEV_INDEX
      0x03, 0x00, 0x00, 0x00,
  };
  EXPECT_EQ(encodeGet(21, Kind::Channels, 3, 100), want);
  EXPECT_EQ(encodeGet(21, Kind::Rings, 3, 100)[16], 15);     // ETHTOOL_MSG_RINGS_GET
  EXPECT_EQ(encodeGet(21, Kind::Coalesce, 3, 100)[16], 19);  // ETHTOOL_MSG_COALESCE_GET
}

TEST(EthtoolEncode, ChannelsSetIsTheRequestTheKernelAccepted) {
  // Sent by the Python client and acked by Linux 6.18 (kChannelsSetAck).
  auto got = encodeSet(21, Kind::Channels, 2, {{"tx", 3}, {"rx", 2}}, 100);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, hex("30 00 00 00 15 00 05 00 64 00 00 00 00 00 00 00 12 01 00 00 0c 00 01 80 08 00 01 00 02 00 00 00 "
                      "08 00 06 00 02 00 00 00 08 00 07 00 03 00 00 00"));
}

TEST(EthtoolEncode, RingsSetPutsOneByteValuesInPaddedAttributes) {
  auto got = encodeSet(21, Kind::Rings, 4, {{"rx", 512}, {"tx-push", 1}, {"tcp-data-split", 2}}, 9);
  ASSERT_TRUE(got.ok());
  const Bytes want = {
      0x38, 0x00, 0x00, 0x00, 0x15, 0x00, 0x05, 0x00, 0x09, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x01, 0x00, 0x00,  // ETHTOOL_MSG_RINGS_SET
      0x0c, 0x00, 0x01, 0x80, 0x08, 0x00, 0x01, 0x00,              // header nest, DEV_INDEX
      0x04, 0x00, 0x00, 0x00,                                      //
      0x08, 0x00, 0x06, 0x00, 0x00, 0x02, 0x00, 0x00,              // ETHTOOL_A_RINGS_RX 512
      0x05, 0x00, 0x0b, 0x00, 0x02, 0x00, 0x00, 0x00,              // ETHTOOL_A_RINGS_TCP_DATA_SPLIT (u8) ENABLED
      0x05, 0x00, 0x0d, 0x00, 0x01, 0x00, 0x00, 0x00,              // ETHTOOL_A_RINGS_TX_PUSH (u8) 1
  };
  EXPECT_EQ(*got, want);
}

TEST(EthtoolEncode, CoalesceSetUsesTheIdsAfterTheCqeModes) {
  auto got = encodeSet(21, Kind::Coalesce, 4, {{"tx-aggr-max-bytes", 4096}, {"adaptive-rx", 1}, {"cqe-mode-rx", 0}}, 1);
  ASSERT_TRUE(got.ok());
  const Bytes want =
      hex("38 00 00 00 15 00 05 00 01 00 00 00 00 00 00 00 14 01 00 00 0c 00 01 80 08 00 01 00 04 00 00 00") +
      nla(11, {1}) + nla(25, {0}) + nla(26, u32(4096));
  EXPECT_EQ(*got, want);
}

TEST(EthtoolEncode, RefusesNamesTheKindLacksAndOneByteValuesAbove255) {
  auto unknown = encodeSet(21, Kind::Channels, 4, {{"rx-usecs", 1}}, 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, EINVAL);
  EXPECT_NE(unknown.error().message.find("\"rx-usecs\""), std::string::npos);
  auto big = encodeSet(21, Kind::Coalesce, 4, {{"adaptive-tx", 256}}, 1);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message, "ethtool coalesce adaptive-tx takes 0 to 255, not 256");
  EXPECT_TRUE(encodeSet(21, Kind::Coalesce, 4, {{"adaptive-tx", 255}}, 1).ok());
}

TEST(EthtoolEncode, EverySettingRoundTripsThroughTheReplyDecoder) {
  // ETHTOOL_MSG_<KIND>_SET and _GET_REPLY share their numbers (16, 18, 20), so a SET request
  // decodes as a reply with the same values.
  for (Kind kind : kKinds) {
    SCOPED_TRACE(std::string(toString(kind)));
    std::map<std::string, uint32_t> values;
    uint32_t n = 1;
    for (const auto& a : attributes(kind)) values[std::string(a.name)] = a.type == AttrType::U8 ? n++ % 3 : 1000 * n++;
    auto request = encodeSet(21, kind, 42, values, 5);
    ASSERT_TRUE(request.ok());
    auto reply = decodeReply(kind, only(*request));
    ASSERT_TRUE(reply.ok()) << reply.error().message;
    EXPECT_EQ(reply->ifindex, 42U);
    EXPECT_EQ(reply->values, values);
    EXPECT_TRUE(reply->maxima.empty());
    // Each attribute is found again from its offset, as the kernel's NLMSGERR_ATTR_OFFS gives it.
    uint32_t offset = 32;
    for (const auto& [name, value] : values) {
      EXPECT_EQ(attributeAt(kind, *request, offset), name);
      EXPECT_EQ(attributeAt(kind, *request, offset + 4), name);
      offset += 8;
    }
    EXPECT_EQ(attributeAt(kind, *request, 24), "header");
    EXPECT_EQ(attributeAt(kind, *request, offset), std::nullopt);
  }
}

TEST(EthtoolDecode, FamilyOfThisMachinesKernel) {
  Bytes bytes = hex(kFamilyReply);
  auto family = decodeFamily(only(bytes));
  ASSERT_TRUE(family.ok()) << family.error().message;
  EXPECT_EQ(family->id, 21);
  EXPECT_EQ(family->version, 1U);
  EXPECT_EQ(family->commands.size(), 50U);
  EXPECT_TRUE(family->supports(Kind::Rings));
  EXPECT_TRUE(family->supports(Kind::Channels));
  EXPECT_TRUE(family->supports(Kind::Coalesce));
}

TEST(EthtoolDecode, FamilyOfLinux56HasNoRingMessages) {
  // CTRL_ATTR_OPS lists one nest per command with CTRL_ATTR_OP_ID; 5.6 stops at 14 (PRIVFLAGS_SET).
  Bytes ops;
  for (uint32_t id = 1; id <= 14; ++id) ops = ops + nla(static_cast<uint16_t>(id), nla(1, u32(id)) + nla(2, u32(0xe)));
  Bytes bytes = genl(0x10, 1, nla(2, hex("65 74 68 74 6f 6f 6c 00")) + nla(1, {0x13, 0x00}) + nla(0x8006, ops));
  auto family = decodeFamily(only(bytes));
  ASSERT_TRUE(family.ok()) << family.error().message;
  EXPECT_EQ(family->id, 0x13);
  EXPECT_EQ(family->commands.size(), 14U);
  EXPECT_FALSE(family->supports(Kind::Rings));
  EXPECT_FALSE(family->supports(Kind::Coalesce));
}

TEST(EthtoolDecode, FamilyOfAnotherNameOrWithoutIdIsAnError) {
  Bytes other = genl(0x10, 1, nla(2, hex("6e 6c 38 30 32 31 31 00")) + nla(1, {0x13, 0x00}));
  ASSERT_FALSE(decodeFamily(only(other)).ok());
  EXPECT_NE(decodeFamily(only(other)).error().message.find("nl80211"), std::string::npos);
  Bytes noId = genl(0x10, 1, nla(2, hex("65 74 68 74 6f 6f 6c 00")));
  EXPECT_FALSE(decodeFamily(only(noId)).ok());
  Bytes wideId = genl(0x10, 1, nla(2, hex("65 74 68 74 6f 6f 6c 00")) + nla(1, u32(0x13)));
  EXPECT_FALSE(decodeFamily(only(wideId)).ok());
  Bytes notCtrl = genl(0x15, 1, nla(2, hex("65 74 68 74 6f 6f 6c 00")) + nla(1, {0x13, 0x00}));
  EXPECT_FALSE(decodeFamily(only(notCtrl)).ok());
}

TEST(EthtoolDecode, ChannelsOfAVeth) {
  Bytes bytes = hex(kVethChannelsReply);
  auto reply = decodeReply(Kind::Channels, only(bytes));
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->ifindex, 2U);
  EXPECT_EQ(reply->ifname, "vb");
  EXPECT_EQ(reply->values, (std::map<std::string, uint32_t>{{"rx", 4}, {"tx", 4}}));
  EXPECT_EQ(reply->maxima, (std::map<std::string, uint32_t>{{"rx", 4}, {"tx", 4}}));
}

TEST(EthtoolDecode, RingsChannelsAndCoalescingOfAVirtioNicFillTheState) {
  Bytes rings = hex(kVirtioRingsReply), channels = hex(kVirtioChannelsReply), coalesce = hex(kVirtioCoalesceReply);
  EthtoolState state;
  auto r = decodeReply(Kind::Rings, only(rings));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->ifname, "eth0");
  store(state, Kind::Rings, *r);
  auto c = decodeReply(Kind::Channels, only(channels));
  ASSERT_TRUE(c.ok()) << c.error().message;
  store(state, Kind::Channels, *c);
  auto k = decodeReply(Kind::Coalesce, only(coalesce));
  ASSERT_TRUE(k.ok()) << k.error().message;
  store(state, Kind::Coalesce, *k);
  using Map = std::map<std::string, uint32_t>;
  EXPECT_EQ(state.rings, (Map{{"rx", 256}, {"tx", 256}, {"tx-push", 0}, {"rx-push", 0}}));
  EXPECT_EQ(state.ringsMax, (Map{{"rx", 256}, {"tx", 256}}));
  EXPECT_EQ(state.channels, (Map{{"combined", 1}}));
  EXPECT_EQ(state.channelsMax, (Map{{"combined", 1}}));
  EXPECT_EQ(state.coalesce,
            (Map{{"rx-usecs", 0}, {"rx-frames", 1}, {"tx-usecs", 0}, {"tx-frames", 1}, {"adaptive-rx", 0}}));
}

TEST(EthtoolDecode, MaximaOfTheNewerRingAttributes) {
  Bytes bytes =
      genl(21, 16, header(5, "ens1") + nla(15, u32(96)) + nla(16, u32(256)) + nla(17, u32(0)) + nla(18, u32(1024)));
  auto reply = decodeReply(Kind::Rings, only(bytes));
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->values, (std::map<std::string, uint32_t>{{"tx-push-buf-len", 96}, {"hds-thresh", 0}}));
  EXPECT_EQ(reply->maxima, (std::map<std::string, uint32_t>{{"tx-push-buf-len", 256}, {"hds-thresh", 1024}}));
}

TEST(EthtoolDecode, SkipsAttributesOfNewerKernels) {
  // RINGS 19 (RX_BUF_LEN_MAX, proposed), COALESCE 29 (RX_PROFILE, a nest, 6.10), header field 4
  // (PHY_INDEX, 6.12), and a string of odd length where a u32 would be.
  Bytes rings = genl(21, 16, header(5, "ens1") + nla(6, u32(512)) + nla(19, u32(8192)) + nla(40, {1, 2, 3}));
  auto r = decodeReply(Kind::Rings, only(rings));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->values, (std::map<std::string, uint32_t>{{"rx", 512}}));
  Bytes coalesce = genl(
      21, 20, nla(0x8001, nla(1, u32(5)) + nla(4, u32(1))) + nla(2, u32(8)) + nla(0x801d, nla(0x8001, nla(1, u32(1)))));
  auto k = decodeReply(Kind::Coalesce, only(coalesce));
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->values, (std::map<std::string, uint32_t>{{"rx-usecs", 8}}));
  EXPECT_EQ(k->ifname, "");
}

TEST(EthtoolDecode, MalformedRepliesAreErrors) {
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"u32 of two bytes", genl(21, 18, header(2, "vb") + nla(6, {4, 0}))},
      {"u8 of four bytes", genl(21, 16, header(2, "vb") + nla(13, u32(1)))},
      {"maximum of one byte", genl(21, 18, header(2, "vb") + nla(2, {4}))},
      {"index of one byte", genl(21, 18, nla(0x8001, nla(1, {2})))},
      {"no header", genl(21, 18, nla(6, u32(4)))},
      {"wrong command", genl(21, 17, header(2, "vb"))},
      {"no genl header", hex("12 00 00 00 15 00 00 00 64 00 00 00 00 00 00 00 12 01")},
      // The header nest claims 12 bytes, its DEV_INDEX inside claims 9.
      {"nested length", genl(21, 18, hex("0c 00 01 80 09 00 01 00 02 00 00 00"))},
      // An attribute longer than the message.
      {"attribute past the end", genl(21, 18, header(2, "vb") + hex("08 00 06 00 04 00"))},
      {"attribute length below 4", genl(21, 18, header(2, "vb") + hex("02 00 06 00"))},
      {"two trailing bytes", genl(21, 18, header(2, "vb") + hex("00 00"))},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    auto messages = splitMessages(bytes);
    ASSERT_TRUE(messages.ok()) << messages.error().message;
    auto reply = decodeReply(Kind::Rings, messages->front());
    auto channels = decodeReply(Kind::Channels, messages->front());
    ASSERT_FALSE(channels.ok());
    EXPECT_EQ(channels.error().code, EPROTO);
    EXPECT_FALSE(reply.ok());
  }
}

TEST(EthtoolSplit, CutsADatagramAndRefusesBadLengths) {
  Bytes two = hex(kVethChannelsReply) + hex(kChannelsSetAck);
  auto messages = splitMessages(two);
  ASSERT_TRUE(messages.ok());
  ASSERT_EQ(messages->size(), 2U);
  EXPECT_EQ((*messages)[0].type, 21);
  EXPECT_EQ((*messages)[1].type, kNlmsgError);
  EXPECT_EQ((*messages)[1].flags, 0x100);
  EXPECT_EQ((*messages)[1].seq, 100U);
  EXPECT_EQ((*messages)[1].bytes.size(), 36U);
  EXPECT_TRUE(splitMessages(Bytes{}).ok());
  EXPECT_FALSE(splitMessages(hex(kChannelsSetAck) + Bytes{0, 0, 0, 0}).ok());                // a cut header
  EXPECT_FALSE(splitMessages(hex("0f 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00")).ok());  // shorter than a header
  EXPECT_FALSE(splitMessages(hex("40 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00")).ok());  // longer than the datagram
}

TEST(EthtoolAck, AcksAndErrorsOfThisMachinesKernel) {
  struct Case {
    const char* bytes;
    int error;
    std::string message;
    std::optional<uint32_t> offset;
  };
  const std::vector<Case> cases = {
      {kChannelsSetAck, 0, "", std::nullopt},
      {kRingsGetNotSupported, EOPNOTSUPP, "", std::nullopt},
      {kChannelsExceedMaximum, EINVAL, "requested channel count exceeds maximum", 32},
      {kUncappedExceedMaximum, EINVAL, "requested channel count exceeds maximum", 32},
      {kUnknownAttribute, EINVAL, "Unknown attribute type", 32},
      {kRxBufLenNotSupported, EOPNOTSUPP, "setting rx buf len not supported", 32},
      {kNoDevice, ENODEV, "no device matches ifindex", 24},
      {kNotPermitted, EPERM, "", std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bytes);
    Bytes bytes = hex(c.bytes);
    auto ack = decodeAck(only(bytes));
    ASSERT_TRUE(ack.ok()) << ack.error().message;
    EXPECT_EQ(ack->error, c.error);
    EXPECT_EQ(ack->message, c.message);
    EXPECT_EQ(ack->offset, c.offset);
    EXPECT_EQ(ack->missingType, std::nullopt);
  }
}

TEST(EthtoolAck, MissingAttributeOfLinux60) {
  // NLMSGERR_ATTR_MISS_TYPE (5) names an attribute a request lacked.
  Bytes bytes = hex("2c 00 00 00 02 00 00 03 01 00 00 00 00 00 00 00 ea ff ff ff 14 00 00 00 15 00 05 00 01 00 00 00 "
                    "00 00 00 00") +
                nla(5, u32(1));
  auto ack = decodeAck(only(bytes));
  ASSERT_TRUE(ack.ok()) << ack.error().message;
  EXPECT_EQ(ack->missingType, 1U);
}

TEST(EthtoolAck, MalformedErrorsAreErrors) {
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"no request header", hex("18 00 00 00 02 00 00 01 64 00 00 00 00 00 00 00 ea ff ff ff 20 00 00 00")},
      {"positive errno", hex("24 00 00 00 02 00 00 01 64 00 00 00 00 00 00 00 16 00 00 00 20 00 00 00 15 00 01 00 "
                             "64 00 00 00 00 00 00 00")},
      {"INT_MIN", hex("24 00 00 00 02 00 00 01 64 00 00 00 00 00 00 00 00 00 00 80 20 00 00 00 15 00 01 00 "
                      "64 00 00 00 00 00 00 00")},
      // Not capped, and the echoed request claims more than follows.
      {"echo too long", hex("28 00 00 00 02 00 00 00 64 00 00 00 00 00 00 00 ea ff ff ff 40 00 00 00 15 00 01 00 "
                            "64 00 00 00 00 00 00 00 12 01 00 00")},
      {"echo shorter than a header", hex("28 00 00 00 02 00 00 00 64 00 00 00 00 00 00 00 ea ff ff ff 08 00 00 00 "
                                         "15 00 01 00 64 00 00 00 00 00 00 00 12 01 00 00")},
      {"offset of two bytes", hex("2c 00 00 00 02 00 00 03 64 00 00 00 00 00 00 00 ea ff ff ff 20 00 00 00 15 00 01 00 "
                                  "64 00 00 00 00 00 00 00 06 00 02 00 20 00 00 00")},
      {"extack cut short", hex("2a 00 00 00 02 00 00 03 64 00 00 00 00 00 00 00 ea ff ff ff 20 00 00 00 15 00 01 00 "
                               "64 00 00 00 00 00 00 00 08 00 01 00 41 00")},
      {"not an error", hex(kVethChannelsReply)},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    auto messages = splitMessages(bytes);
    ASSERT_TRUE(messages.ok()) << messages.error().message;
    auto ack = decodeAck(messages->front());
    ASSERT_FALSE(ack.ok());
    EXPECT_EQ(ack.error().code, EPROTO);
  }
}

TEST(EthtoolAck, OldKernelsCapWithoutTheFlag) {
  // Before 4.12 a capped error had no NLM_F_CAPPED; nothing follows the request's header.
  Bytes bytes =
      hex("24 00 00 00 02 00 00 00 01 00 00 00 00 00 00 00 fe ff ff ff 20 00 00 00 10 00 05 00 "
          "01 00 00 00 00 00 00 00");
  auto ack = decodeAck(only(bytes));
  ASSERT_TRUE(ack.ok()) << ack.error().message;
  EXPECT_EQ(ack->error, ENOENT);
}

TEST(EthtoolDescribe, DriverWithoutTheSettingNamesTheAttributeAndQuotesTheKernel) {
  Bytes request = hex(kRingsSetRxBufLen), answer = hex(kRxBufLenNotSupported);
  auto ack = decodeAck(only(answer));
  ASSERT_TRUE(ack.ok());
  auto e = describeFailure(Kind::Rings, Op::Change, "veth0", request, *ack, KernelVersion{6, 18, 0});
  EXPECT_EQ(e.code, EOPNOTSUPP);
  EXPECT_EQ(e.describe(),
            "ring change on veth0: rx-buf-len is not supported by the driver (Operation not supported; kernel: "
            "setting rx buf len not supported, at rx-buf-len)");
}

TEST(EthtoolDescribe, DriverWithoutTheOperation) {
  Bytes request = hex(kRingsSetRxBufLen), answer = hex(kRingsGetNotSupported);
  auto e = describeFailure(Kind::Rings, Op::Change, "veth0", request, *decodeAck(only(answer)), std::nullopt);
  EXPECT_EQ(e.describe(), "ring change on veth0: not supported by the driver (Operation not supported)");
}

TEST(EthtoolDescribe, ValueOverTheMaximumNamesValueAndAttribute) {
  Bytes request = hex(kChannelsSetCombined1), answer = hex(kChannelsExceedMaximum);
  auto e = describeFailure(Kind::Channels, Op::Change, "veth0", request, *decodeAck(only(answer)), std::nullopt);
  EXPECT_EQ(e.code, EINVAL);
  EXPECT_EQ(e.describe(),
            "channel change on veth0: combined 1 exceeds the device's maximum (Invalid argument; kernel: requested "
            "channel count exceeds maximum, at combined)");
}

TEST(EthtoolDescribe, AttributeNewerThanTheKernelFromTheExtendedAck) {
  // The kernel's answer to an attribute id beyond its policy, offset 32: applied to a rings
  // request with RX_PUSH (14) there, it is what Linux 6.1 (ETHTOOL_A_RINGS_MAX 13) answers.
  Bytes request = *encodeSet(21, Kind::Rings, 2, {{"rx-push", 1}}, 100), answer = hex(kUnknownAttribute);
  auto ack = decodeAck(only(answer));
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->message, "Unknown attribute type");
  auto e = describeFailure(Kind::Rings, Op::Change, "eth0", request, *ack, KernelVersion{6, 1, 0});
  EXPECT_EQ(e.describe(),
            "ring change on eth0: this kernel (6.1) does not know rx-push, added in Linux 6.3 (Invalid argument; "
            "kernel: Unknown attribute type, at rx-push)");
  // The real request: an id nobody defined.
  Bytes channels = *encodeSet(21, Kind::Channels, 2, {{"rx", 1}}, 100);
  channels[34] = 10;
  EXPECT_EQ(describeFailure(Kind::Channels, Op::Change, "vb", channels, *ack, std::nullopt).describe(),
            "channel change on vb: this kernel does not know attribute 10 (Invalid argument; kernel: Unknown attribute "
            "type, at attribute 10)");
}

TEST(EthtoolDescribe, AttributeNewerThanTheKernelFromItsVersionWithoutExtendedAck) {
  Bytes request = *encodeSet(21, Kind::Rings, 2, {{"rx", 512}, {"tx-push-buf-len", 64}}, 100);
  Ack ack{EINVAL};
  EXPECT_EQ(describeFailure(Kind::Rings, Op::Change, "eth0", request, ack, KernelVersion{5, 15, 0}).describe(),
            "ring change on eth0: this kernel (5.15) probably does not know tx-push-buf-len, added in Linux 6.4 "
            "(Invalid argument)");
  EXPECT_EQ(describeFailure(Kind::Rings, Op::Change, "eth0", request, ack, KernelVersion{6, 4, 0}).describe(),
            "ring change on eth0: the kernel or the driver refused the values (Invalid argument)");
}

TEST(EthtoolDescribe, PermissionGoneInterfaceAndBusyDevice) {
  Bytes request = hex(kChannelsSetCombined1), answer = hex(kNotPermitted);
  EXPECT_EQ(
      describeFailure(Kind::Channels, Op::Change, "veth0", request, *decodeAck(only(answer)), std::nullopt).describe(),
      "channel change on veth0: needs CAP_NET_ADMIN (Operation not permitted)");
  Bytes get = encodeGet(21, Kind::Channels, 999, 100), gone = hex(kNoDevice);
  auto e = describeFailure(Kind::Channels, Op::Read, "ifindex 999", get, *decodeAck(only(gone)), std::nullopt);
  EXPECT_EQ(e.code, ENODEV);
  EXPECT_EQ(e.describe(),
            "channel read on ifindex 999: the interface is gone (No such device; kernel: no device matches ifindex, at "
            "header)");
  Ack busy{EBUSY};
  EXPECT_EQ(describeFailure(Kind::Coalesce, Op::Change, "eth1", {}, busy, std::nullopt).describe(),
            "coalescing change on eth1: the device is busy (an XDP program or AF_XDP socket may hold its queues) "
            "(Device or resource busy)");
  Ack other{EIO, "firmware timeout"};
  EXPECT_EQ(describeFailure(Kind::Rings, Op::Change, "eth1", {}, other, std::nullopt).describe(),
            "ring change on eth1: Input/output error; kernel: firmware timeout");
}

TEST(EthtoolResolve, MaxBecomesTheDevicesMaximum) {
  EthtoolState state;
  state.read = true;
  state.ringsMax = {{"rx", 4096}, {"tx", 4096}};
  state.channelsMax = {{"combined", 63}};
  EXPECT_EQ(*resolve(state, Kind::Rings, "rx", Amount{}), 4096U);
  EXPECT_EQ(*resolve(state, Kind::Rings, "rx", Amount{1024}), 1024U);
  auto all = resolve(state, Kind::Channels, std::map<std::string, Amount>{{"combined", Amount{}}});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::map<std::string, uint32_t>{{"combined", 63}}));

  auto noMax = resolve(state, Kind::Rings, "rx-jumbo", Amount{});
  ASSERT_FALSE(noMax.ok());
  EXPECT_EQ(noMax.error().message, "rings rx-jumbo: the device reports no maximum");
  EXPECT_FALSE(resolve(state, Kind::Channels, std::map<std::string, Amount>{{"rx", Amount{}}}).ok());
  EXPECT_FALSE(resolve(state, Kind::Coalesce, "rx-usecs", Amount{}).ok());
  EXPECT_FALSE(resolve(EthtoolState{}, Kind::Rings, "rx", Amount{}).ok());
  EXPECT_EQ(*resolve(EthtoolState{}, Kind::Rings, "rx", Amount{512}), 512U);
}

}  // namespace ethtool_codec_test
