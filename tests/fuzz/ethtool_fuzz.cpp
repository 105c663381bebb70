// libFuzzer target: the ethtool netlink decoders (src/adapters/ethtool/codec). The input is a
// datagram as the kernel would send it; every message goes through every decoder. When there are
// two messages, the first is taken as the request the second answers, so the error describer
// walks a request too. Whatever decodes as a reply must encode and decode back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "adapters/ethtool/codec.hpp"

using namespace iommud::adapters::ethtool;  // NOLINT(google-build-using-namespace): a fuzz target

namespace {

void fail(const char* what, Kind kind) {
  std::fprintf(stderr, "%s (%s)\n", what, std::string(toString(kind)).c_str());
  std::abort();
}

void checkReply(Kind kind, const Reply& reply) {
  for (const auto& [name, value] : reply.values) {
    const Attribute* a = findAttribute(kind, name);
    if (a == nullptr) fail("a value without an attribute", kind);
    if (a->type == AttrType::U8 && value > 0xff) fail("a one-byte value above 255", kind);
  }
  for (const auto& [name, value] : reply.maxima) {
    const Attribute* a = findAttribute(kind, name);
    if (a == nullptr || a->maxId == 0) fail("a maximum of an attribute that has none", kind);
  }
  // SET and GET_REPLY share their command numbers: the values go out and come back unchanged.
  auto request = encodeSet(21, kind, reply.ifindex, reply.values, 1);
  if (!request) fail("a decoded reply does not encode", kind);
  auto messages = splitMessages(*request);
  if (!messages || messages->size() != 1) fail("an encoded request does not split", kind);
  auto again = decodeReply(kind, messages->front());
  if (!again || again->values != reply.values || again->ifindex != reply.ifindex) fail("round trip", kind);

  iommud::core::EthtoolState state;
  store(state, kind, reply);
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto messages = splitMessages(ByteView(data, size));
  if (!messages) return 0;
  for (const auto& m : *messages) {
    for (Kind kind : {Kind::Rings, Kind::Channels, Kind::Coalesce}) {
      if (auto reply = decodeReply(kind, m)) checkReply(kind, *reply);
    }
    if (auto family = decodeFamily(m)) (void)family->supports(Kind::Rings);
    if (auto ack = decodeAck(m)) {
      if (ack->error < 0 || ack->error > 4095) std::abort();
      ByteView request = messages->size() > 1 ? messages->front().bytes : ByteView();
      for (Kind kind : {Kind::Rings, Kind::Channels, Kind::Coalesce}) {
        (void)describeFailure(kind, Op::Change, "fuzz0", request, *ack, iommud::core::KernelVersion{5, 15, 0});
        (void)describeFailure(kind, Op::Read, "fuzz0", request, *ack, std::nullopt);
        if (ack->offset) (void)attributeAt(kind, request, *ack->offset);
      }
    }
  }
  return 0;
}
