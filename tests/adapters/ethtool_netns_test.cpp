// The ethtool adapter against the running kernel. The process moves into a network namespace of
// its own (unshare) and makes a veth pair there, so nothing on the host changes and the kernel
// removes namespace and veth when the process ends, however it ends. veth has channels (get and,
// since 5.13, set) but no rings or coalescing. This machine's PCI NIC, if any, is only read.
// Needs root; without it every test FAILS with the reason (CI runs as root).
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "adapters/ethtool/netlink.hpp"
#include "core/text.hpp"

using namespace iommud::adapters::ethtool;
using iommud::core::Amount;

namespace {

// A network interface of the host backed by a PCI function (its `device` link leads into /pci).
struct HostNic {
  std::string name;
  int ifindex = 0;
};

std::optional<HostNic> hostNic;
std::optional<Ethtool> hostEthtool;              // opened before leaving the host's namespace
std::optional<std::string> hostNicRingsPrinted;  // `ethtool -g` of the host NIC, if it has one
std::optional<Ethtool> ethtool;                  // opened in the test's namespace

std::optional<HostNic> findPciNic() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
    auto device = fs::canonical(entry.path() / "device", ec);
    if (ec || device.string().find("/pci") == std::string::npos) continue;
    std::ifstream index(entry.path() / "ifindex");
    int ifindex = 0;
    if (index >> ifindex) return HostNic{entry.path().filename().string(), ifindex};
  }
  return std::nullopt;
}

// What a command prints; nullopt when it cannot run or fails.
std::optional<std::string> output(const std::string& command) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string text;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
  if (pclose(pipe) != 0) return std::nullopt;
  return text;
}

// The "Current hardware settings" of `ethtool -l` or `-g`, by ethtool name ("RX Mini" -> "rx-mini");
// "n/a" and "off"/"on" lines are left out.
std::map<std::string, uint32_t> ethtoolCurrent(const std::string& text) {
  std::map<std::string, uint32_t> out;
  auto at = text.find("Current hardware settings:");
  if (at == std::string::npos) return out;
  for (auto line : iommud::core::split(std::string_view(text).substr(at), '\n')) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto value = iommud::core::trim(line.substr(colon + 1));
    if (value.empty() || value.find_first_not_of("0123456789") != std::string_view::npos) continue;
    std::string name;
    for (char c : iommud::core::trim(line.substr(0, colon))) {
      name += c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    out[name] = static_cast<uint32_t>(std::stoul(std::string(value)));
  }
  return out;
}

bool haveEthtoolCommand() {
  return std::system("ethtool --version >/dev/null 2>&1") == 0;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Leaves the host's namespace once per process, after opening a socket and looking at the NIC
// there. An empty string when all went well, else why not. A failure here fails every test (a
// fatal failure in a gtest Environment would print "SKIPPED", which ctest takes for a skip).
std::string enterNamespace() {
  if (geteuid() != 0) {
    return "the ethtool netns tests need root (a network namespace, a veth pair and ethtool changes); run them "
           "as root, as CI does: ctest -L netns";
  }
  if (std::system("ip -V >/dev/null 2>&1") != 0) return "iproute2's `ip` is missing: scripts/setup --tests";
  // The adapter is compared with the ethtool command; without it the comparisons would not run.
  if (!haveEthtoolCommand())
    return "the ethtool command is missing: install Debian's ethtool package (scripts/setup --tests)";
  hostNic = findPciNic();
  if (hostNic) hostNicRingsPrinted = output("ethtool -g " + hostNic->name);
  auto host = Ethtool::open();
  if (!host.ok()) return host.error().describe();
  hostEthtool = std::move(*host);

  if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  auto inside = Ethtool::open();
  if (!inside.ok()) return inside.error().describe();
  ethtool = std::move(*inside);
  return "";
}

const std::string& namespaceProblem() {
  static const std::string problem = enterNamespace();
  return problem;
}

// Each test gets a fresh veth pair "va"/"vb" with four queues each way.
class EthtoolNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(namespaceProblem(), "");
    ASSERT_EQ(std::system("ip link add va numtxqueues 4 numrxqueues 4 type veth peer name vb numtxqueues 4 "
                          "numrxqueues 4"),
              0)
        << "cannot make a veth pair";
    veth_ = static_cast<int>(if_nametoindex("va"));
    ASSERT_GT(veth_, 0);
  }
  void TearDown() override {
    // Gone already is fine; glibc's fortified system() is warn_unused_result, which (void) does not quiet.
    [[maybe_unused]] const int rc = std::system("ip link del va 2>/dev/null");
  }

  // The message of a change on "va" that the kernel must refuse with `code`.
  std::string refusal(Kind kind, const std::map<std::string, uint32_t>& values, int code) {
    auto set = ethtool->set(veth_, kind, values);
    if (set.ok()) {
      ADD_FAILURE() << "the kernel accepted a " << toString(kind) << " change it should refuse";
      return "";
    }
    EXPECT_EQ(set.error().code, code) << set.error().describe();
    return set.error().describe();
  }

  int veth_ = 0;
};

}  // namespace

TEST_F(EthtoolNetns, ReadsTheChannelsOfAVethAndNoRingsOrCoalescing) {
  auto state = ethtool->read(veth_);
  ASSERT_TRUE(state.ok()) << state.error().describe();
  EXPECT_TRUE(state->read);
  using Map = std::map<std::string, uint32_t>;
  EXPECT_EQ(state->channels, (Map{{"rx", 4}, {"tx", 4}}));
  EXPECT_EQ(state->channelsMax, (Map{{"rx", 4}, {"tx", 4}}));
  // veth has no get_ringparam or get_coalesce: EOPNOTSUPP leaves those parts empty.
  EXPECT_TRUE(state->rings.empty());
  EXPECT_TRUE(state->coalesce.empty());
}

TEST_F(EthtoolNetns, SetsRxAndTxChannelsAndReadsThemBack) {
  auto set = ethtool->set(veth_, Kind::Channels, {{"rx", 2}, {"tx", 3}});
  ASSERT_TRUE(set.ok()) << set.error().describe();
  auto state = ethtool->read(veth_);
  ASSERT_TRUE(state.ok()) << state.error().describe();
  EXPECT_EQ(state->channels, (std::map<std::string, uint32_t>{{"rx", 2}, {"tx", 3}}));
  // The same values again change nothing and are no error.
  EXPECT_TRUE(ethtool->set(veth_, Kind::Channels, {{"rx", 2}, {"tx", 3}}).ok());

  // "max" resolved from what was read.
  auto values = resolve(*state, Kind::Channels, std::map<std::string, Amount>{{"rx", Amount{}}, {"tx", Amount{1}}});
  ASSERT_TRUE(values.ok()) << values.error().describe();
  ASSERT_TRUE(ethtool->set(veth_, Kind::Channels, *values).ok());
  auto again = ethtool->get(veth_, Kind::Channels);
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_EQ(again->values, (std::map<std::string, uint32_t>{{"rx", 4}, {"tx", 1}}));
  EXPECT_EQ(again->ifname, "va");
}

TEST_F(EthtoolNetns, AgreesWithTheEthtoolCommand) {
  ASSERT_TRUE(haveEthtoolCommand()) << "the ethtool command is not installed: install Debian's ethtool package "
                                       "(scripts/setup --tests)";
  ASSERT_TRUE(ethtool->set(veth_, Kind::Channels, {{"rx", 1}, {"tx", 2}}).ok());
  auto printed = output("ethtool -l va");
  ASSERT_TRUE(printed) << "ethtool -l va failed";
  auto state = ethtool->read(veth_);
  ASSERT_TRUE(state.ok()) << state.error().describe();
  EXPECT_EQ(ethtoolCurrent(*printed), state->channels) << *printed;
  EXPECT_EQ(state->channels, (std::map<std::string, uint32_t>{{"rx", 1}, {"tx", 2}}));
}

TEST_F(EthtoolNetns, ChannelsOverTheMaximumFailWithTheKernelsMessage) {
  // veth reports no combined channels (maximum 0) and four rx queues.
  auto combined = refusal(Kind::Channels, {{"combined", 1}}, EINVAL);
  EXPECT_PRED2(contains, combined, "channel change on va: combined 1 exceeds the device's maximum");
  EXPECT_PRED2(contains, combined, "kernel: requested channel count exceeds maximum");
  EXPECT_PRED2(contains, refusal(Kind::Channels, {{"rx", 5}}, EINVAL), "rx 5 exceeds the device's maximum");
}

TEST_F(EthtoolNetns, RingChangeOnAVethIsNotSupportedByTheDriver) {
  EXPECT_EQ(refusal(Kind::Rings, {{"rx", 256}}, EOPNOTSUPP),
            "ring change on va: not supported by the driver (Operation not supported)");
  // An attribute the driver does not declare is refused before the driver is asked (5.17).
  auto bufLen = refusal(Kind::Rings, {{"rx-buf-len", 2048}}, EOPNOTSUPP);
  EXPECT_PRED2(contains, bufLen, "rx-buf-len is not supported by the driver");
  EXPECT_PRED2(contains, bufLen, "kernel: setting rx buf len not supported");
  EXPECT_PRED2(contains, refusal(Kind::Coalesce, {{"rx-usecs", 8}}, EOPNOTSUPP), "coalescing change on va");
}

TEST_F(EthtoolNetns, AnUnknownInterfaceIsGone) {
  auto state = ethtool->read(99999);
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.error().code, ENODEV);
  EXPECT_TRUE(contains(state.error().describe(), "ring read on ifindex 99999: the interface is gone"))
      << state.error().describe();
  auto set = ethtool->set(99999, Kind::Channels, {{"rx", 1}});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.error().code, ENODEV);
  EXPECT_FALSE(ethtool->read(0).ok());
}

TEST_F(EthtoolNetns, ChangesNeedCapNetAdmin) {
  // A child that gives up root (and with it every capability) may read but not change.
  EXPECT_EXIT(
      {
        if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) std::_Exit(2);
        auto unprivileged = Ethtool::open();
        if (!unprivileged.ok()) std::_Exit(3);
        if (!unprivileged->read(veth_).ok()) std::_Exit(4);
        auto set = unprivileged->set(veth_, Kind::Channels, {{"rx", 1}});
        if (set.ok()) std::_Exit(5);
        std::fprintf(stderr, "%s\n", set.error().describe().c_str());
        std::_Exit(set.error().code == EPERM ? 0 : 6);
      },
      ::testing::ExitedWithCode(0), "channel change on va: needs CAP_NET_ADMIN \\(Operation not permitted\\)");
}

TEST(EthtoolHostNic, RingsAreReadNeverSet) {
  ASSERT_EQ(namespaceProblem(), "");
  if (!hostNic) GTEST_SKIP() << "this machine has no PCI-backed network interface";
  auto state = hostEthtool->read(hostNic->ifindex);
  ASSERT_TRUE(state.ok()) << state.error().describe();
  std::string summary;
  for (const auto& [name, value] : state->rings) summary += " " + name + "=" + std::to_string(value);
  RecordProperty("rings", summary);
  std::printf("%s rings:%s\n", hostNic->name.c_str(), summary.c_str());
  for (const auto& [name, max] : state->ringsMax) {
    ASSERT_TRUE(state->rings.contains(name)) << name;
    EXPECT_LE(state->rings.at(name), max) << name;
  }
  // The ethtool command printed them before the tests left the host's namespace.
  if (hostNicRingsPrinted) {
    for (const auto& [name, value] : ethtoolCurrent(*hostNicRingsPrinted)) {
      if (state->rings.contains(name)) {
        EXPECT_EQ(state->rings.at(name), value) << name << "\n" << *hostNicRingsPrinted;
      }
    }
  }
}
