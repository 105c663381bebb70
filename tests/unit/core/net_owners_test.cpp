#include "core/net_owners.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "adapters/sysfs/net_owners_reader.hpp"
#include "support/fake_host.hpp"

namespace net_owners_test {

using namespace iommud;
using namespace iommud::core;
using iommud::testing::FakeHost;

// As systemd 252.39-1~deb12u2 ships them in /lib/systemd/network (Debian 12).
constexpr const char* kDebian99Default = R"(# SPDX-License-Identifier: MIT-0
#
# This config file is installed as part of systemd.
# It may be freely copied and edited (following the MIT No Attribution license).
#
# To make local modifications, one of the following methods may be used:
# 1. add a drop-in file that extends this file by creating the
#    /etc/systemd/network/99-default.link.d/ directory and creating a
#    new .conf file there.
# 2. copy this file into /etc/systemd/network or one of the other paths checked
#    by systemd-udevd and edit it there.
# This file should not be edited in place, because it'll be overwritten on upgrades.

[Match]
OriginalName=*

[Link]
NamePolicy=keep kernel database onboard slot path
AlternativeNamesPolicy=database onboard slot path
MACAddressPolicy=persistent
)";

constexpr const char* kDebian73UsbNetByMac = R"([Match]
Path=*-usb-*

[Link]
NamePolicy=mac
)";

// A profile as `nmcli connection add type ethernet ifname enp1s0 con-name uplink ethtool.ring-rx
// 4096 ...` writes it (NetworkManager 1.42, Debian 12).
constexpr const char* kNmcliUplink = R"([connection]
id=uplink
uuid=2f7c2b8e-5a0e-4f7e-9a39-6c1d0d3e0a11
type=ethernet
interface-name=enp1s0

[ethernet]

[ethtool]
channels-combined=8
coalesce-adaptive-rx=0
coalesce-rx-usecs=50
ring-rx=4096
ring-tx=4096

[ipv4]
method=auto

[ipv6]
addr-gen-mode=default
method=auto

[proxy]
)";

constexpr const char* kMac = "3c:fd:fe:a1:b2:c3";

NicIdentity ixgbeNic() {
  NicIdentity nic;
  nic.name = "enp1s0";
  nic.originalName = "eth0";
  nic.mac = kMac;
  nic.permanentMac = kMac;
  nic.driver = "ixgbe";
  nic.idPath = "pci-0000:01:00.0";
  nic.type = "ether";
  nic.kind = "";
  nic.properties = {{"ID_BUS", "pci"}, {"ID_PATH", "pci-0000:01:00.0"}};
  return nic;
}

LinkFile etcLink(const std::string& name, const std::string& text) {
  return parseLinkFile("/etc/systemd/network/" + name, text);
}

NetOwnerSources withLinks(std::vector<LinkFile> files) {
  NetOwnerSources s;
  s.linkFiles = std::move(files);
  return s;
}

std::vector<std::string> describe(const NetOwnerReport& r) {
  std::vector<std::string> out;
  for (const auto& o : r.owners) {
    out.push_back(std::string(toString(o.owner)) + " " + o.setting.file + ":" + std::to_string(o.setting.line) + " " +
                  std::string(toString(o.setting.kind)) + "." + o.setting.key + "=" + o.setting.value + " " +
                  std::string(toString(o.certainty)));
  }
  return out;
}

TEST(NetOwners, DebianDefaultLinkFilesSetNothing) {
  auto sources = withLinks({parseLinkFile("/usr/lib/systemd/network/73-usb-net-by-mac.link", kDebian73UsbNetByMac),
                            parseLinkFile("/usr/lib/systemd/network/99-default.link", kDebian99Default)});
  EXPECT_EQ(matchLinkFile(sources.linkFiles[0], ixgbeNic()).result, MatchResult::No);
  auto v = matchLinkFile(sources.linkFiles[1], ixgbeNic());
  EXPECT_EQ(v.result, MatchResult::Yes);
  EXPECT_EQ(v.reason, "OriginalName=*");
  EXPECT_TRUE(sources.linkFiles[1].settings.empty());
  EXPECT_TRUE(sources.linkFiles[1].issues.empty());
  auto r = competingOwners(sources, ixgbeNic());
  EXPECT_TRUE(r.owners.empty());
  EXPECT_TRUE(r.issues.empty());
}

TEST(NetOwners, OriginalNameStarMatchesARenamedNicWhoseKernelNameIsUnknown) {
  auto nic = ixgbeNic();
  nic.originalName.reset();
  auto def = parseLinkFile("/usr/lib/systemd/network/99-default.link", kDebian99Default);
  EXPECT_EQ(matchLinkFile(def, nic).result, MatchResult::Yes);
  auto byName = etcLink("10-eth0.link", "[Match]\nOriginalName=eth0\n[Link]\nRxBufferSize=1024\n");
  auto v = matchLinkFile(byName, nic);
  EXPECT_EQ(v.result, MatchResult::Maybe);
  EXPECT_NE(v.reason.find("original kernel name is not known"), std::string::npos) << v.reason;
}

TEST(NetOwners, AUserLinkFileBeforeTheDefaultOwnsRingsChannelsAndCoalescing) {
  auto rings = etcLink("10-uplink.link", R"([Match]
MACAddress=3C-FD-FE-A1-B2-C3

[Link]
RxBufferSize=4096
TxBufferSize=max
CombinedChannels=8
RxCoalesceSec=50us
TxCoalesceSec=1.5ms
UseAdaptiveRxCoalesce=no
CoalescePacketRateSampleIntervalSec=1500ms
RxMaxCoalescedFrames=64
)");
  EXPECT_TRUE(rings.issues.empty());
  auto r = competingOwners(
      withLinks({rings, parseLinkFile("/usr/lib/systemd/network/99-default.link", kDebian99Default)}), ixgbeNic());
  const std::string at = "systemd-udevd /etc/systemd/network/10-uplink.link:";
  EXPECT_EQ(describe(r), (std::vector<std::string>{
                             at + "5 rings.rx=4096 applies",
                             at + "6 rings.tx=max applies",
                             at + "7 channels.combined=8 applies",
                             at + "8 coalesce.rx-usecs=50us applies",
                             at + "9 coalesce.tx-usecs=1.5ms applies",
                             at + "10 coalesce.adaptive-rx=no applies",
                             at + "11 coalesce.sample-interval=1500ms applies",
                             at + "12 coalesce.rx-frames=64 applies",
                         }));
  ASSERT_EQ(r.owners.size(), 8U);
  EXPECT_EQ(r.owners[0].setting.number, 4096U);
  EXPECT_EQ(r.owners[1].setting.number, std::nullopt);  // max
  EXPECT_EQ(r.owners[3].setting.number, 50U);
  EXPECT_EQ(r.owners[4].setting.number, 1500U);
  EXPECT_EQ(r.owners[5].setting.number, 0U);
  EXPECT_EQ(r.owners[6].setting.number, 2U);  // seconds, rounded up as udev does
  EXPECT_EQ(r.owners[0].reason, "first matching .link file: MACAddress=3c:fd:fe:a1:b2:c3");
  EXPECT_EQ(r.of(NetSettingKind::Channels, "combined").size(), 1U);
  EXPECT_TRUE(r.of(NetSettingKind::Channels, "rx").empty());
}

TEST(NetOwners, OnlyTheFirstMatchingLinkFileApplies) {
  auto other = etcLink("05-e1000e.link", "[Match]\nDriver=e1000e\n[Link]\nRxBufferSize=256\n");
  auto first = etcLink("20-all.link", "[Match]\nOriginalName=*\n[Link]\nRxBufferSize=1024\n");
  auto second = etcLink("30-ixgbe.link", "[Match]\nDriver=ixgbe\n[Link]\nRxBufferSize=2048\nTxBufferSize=2048\n");
  auto r = competingOwners(withLinks({other, first, second}), ixgbeNic());
  EXPECT_EQ(describe(r),
            (std::vector<std::string>{"systemd-udevd /etc/systemd/network/20-all.link:4 rings.rx=1024 applies"}));
}

TEST(NetOwners, AFileThatMayMatchFirstMakesLaterOnesOnlyMayApply) {
  auto host = etcLink("10-host.link", "[Match]\nHost=db1\nOriginalName=*\n[Link]\nRxBufferSize=1024\n");
  auto mac = etcLink("20-mac.link", std::string("[Match]\nMACAddress=") + kMac + "\n[Link]\nRxBufferSize=2048\n");
  auto later = etcLink("30-later.link", "[Match]\nOriginalName=*\n[Link]\nTxBufferSize=512\n");
  auto r = competingOwners(withLinks({host, mac, later}), ixgbeNic());
  EXPECT_EQ(describe(r), (std::vector<std::string>{
                             "systemd-udevd /etc/systemd/network/10-host.link:5 rings.rx=1024 may-apply",
                             "systemd-udevd /etc/systemd/network/20-mac.link:4 rings.rx=2048 may-apply",
                         }));
  EXPECT_EQ(r.owners[0].reason, "Host= is evaluated by systemd-udevd, not by iommud");
  EXPECT_EQ(r.owners[1].reason,
            "matches: MACAddress=3c:fd:fe:a1:b2:c3; applies only if "
            "/etc/systemd/network/10-host.link does not match first");
}

TEST(NetOwners, AnUnreadableLinkFileMayMatchFirst) {
  LinkFile secret;
  secret.path = "/etc/systemd/network/10-secret.link";
  secret.readable = false;
  auto all = etcLink("20-all.link", "[Match]\nOriginalName=*\n[Link]\nRxBufferSize=1024\n");
  auto r = competingOwners(withLinks({secret, all}), ixgbeNic());
  EXPECT_EQ(describe(r),
            (std::vector<std::string>{"systemd-udevd /etc/systemd/network/20-all.link:4 rings.rx=1024 may-apply"}));
}

TEST(NetOwners, NegationInvertsAWordOrAWholeLine) {
  auto nic = ixgbeNic();
  auto notIxgbe = etcLink("10-a.link", "[Match]\nDriver=!ixgbe\n[Link]\nRxBufferSize=1\n");
  EXPECT_EQ(matchLinkFile(notIxgbe, nic).result, MatchResult::No);
  nic.driver = "e1000e";
  EXPECT_EQ(matchLinkFile(notIxgbe, nic).result, MatchResult::Yes);
  // "!" before the list inverts every word: neither eth0 nor eth1.
  auto neither = etcLink("10-b.link", "[Match]\nOriginalName=!eth0 eth1\n");
  EXPECT_EQ(neither.match.originalNames, (std::vector<std::string>{"!eth0", "!eth1"}));
  EXPECT_EQ(matchLinkFile(neither, ixgbeNic()).result, MatchResult::No);
  nic.originalName = "eth2";
  EXPECT_EQ(matchLinkFile(neither, nic).result, MatchResult::Yes);
  // A positive and a negative pattern: any positive one and no negative one.
  auto mixed = etcLink("10-c.link", "[Match]\nPath=pci-0000:01:* !pci-0000:01:00.1\n");
  EXPECT_EQ(matchLinkFile(mixed, ixgbeNic()).result, MatchResult::Yes);
  nic.idPath = "pci-0000:01:00.1";
  EXPECT_EQ(matchLinkFile(mixed, nic).result, MatchResult::No);
  // Kind= never matches a physical NIC, !Kind= always does.
  EXPECT_EQ(matchLinkFile(etcLink("10-d.link", "[Match]\nKind=*\n"), ixgbeNic()).result, MatchResult::No);
  EXPECT_EQ(matchLinkFile(etcLink("10-e.link", "[Match]\nKind=!bond\n"), ixgbeNic()).result, MatchResult::Yes);
}

TEST(NetOwners, GlobsMatchPathsDriversAndTypes) {
  auto nic = ixgbeNic();
  EXPECT_EQ(matchLinkFile(etcLink("a.link", "[Match]\nPath=pci-0000:0[0-9]:00.?\n"), nic).result, MatchResult::Yes);
  EXPECT_EQ(matchLinkFile(etcLink("b.link", "[Match]\nDriver=ixg* mlx5_*\n"), nic).result, MatchResult::Yes);
  EXPECT_EQ(matchLinkFile(etcLink("c.link", "[Match]\nDriver=\"mlx5_*\"\n"), nic).result, MatchResult::No);
  EXPECT_EQ(matchLinkFile(etcLink("d.link", "[Match]\nType=ether\nDriver=ixgbe\n"), nic).result, MatchResult::Yes);
  EXPECT_EQ(matchLinkFile(etcLink("e.link", "[Match]\nType=wlan\n"), nic).result, MatchResult::No);
  // Properties: the ones iommud knows are evaluated (ANDed), the others may hold.
  EXPECT_EQ(matchLinkFile(etcLink("f.link", "[Match]\nProperty=ID_BUS=usb\n"), nic).result, MatchResult::No);
  EXPECT_EQ(matchLinkFile(etcLink("g.link", "[Match]\nProperty=!ID_BUS=usb\n"), nic).result, MatchResult::Yes);
  auto vendor = matchLinkFile(etcLink("h.link", "[Match]\nProperty=ID_BUS=pci ID_VENDOR_ID=0x8086\n"), nic);
  EXPECT_EQ(vendor.result, MatchResult::Maybe);
  EXPECT_EQ(vendor.reason, "Property=ID_VENDOR_ID=0x8086: the udev property is not known to iommud");
  // Unknown facts make a verdict "may", never "no".
  nic.driver.reset();
  EXPECT_EQ(matchLinkFile(etcLink("i.link", "[Match]\nDriver=ixgbe\n"), nic).result, MatchResult::Maybe);
}

TEST(NetOwners, MacAddressesInEveryFormSystemdAccepts) {
  EXPECT_EQ(normalizeMac("3C:FD:FE:A1:B2:C3"), kMac);
  EXPECT_EQ(normalizeMac("3c-fd-fe-a1-b2-c3"), kMac);
  EXPECT_EQ(normalizeMac("3cfd.fea1.b2c3"), kMac);
  EXPECT_EQ(normalizeMac("3c:fd:fe:a1:b2:c3\n"), kMac);
  EXPECT_EQ(normalizeMac("3c:fd:fe:a1:b2"), std::nullopt);
  EXPECT_EQ(normalizeMac("192.168.0.1"), std::nullopt);
  EXPECT_EQ(normalizeMac("3c:fd:fe:a1:b2:c3:"), std::nullopt);
  auto perm = etcLink("a.link", "[Match]\nPermanentMACAddress=00:11:22:33:44:55 3cfd.fea1.b2c3\n");
  EXPECT_EQ(matchLinkFile(perm, ixgbeNic()).result, MatchResult::Yes);
  auto nic = ixgbeNic();
  nic.permanentMac.reset();
  EXPECT_EQ(matchLinkFile(perm, nic).result, MatchResult::Maybe);
  // An empty assignment resets the list.
  auto reset = etcLink("b.link", "[Match]\nMACAddress=00:11:22:33:44:55\nMACAddress=\nOriginalName=*\n");
  EXPECT_TRUE(reset.match.macAddresses.empty());
}

TEST(NetOwners, SameNameFilesShadowLowerDirectoriesAndAllAreOrderedByName) {
  std::vector<ConfDir> dirs = {
      {"/etc/systemd/network", {"99-default.link", "50-uplink.link", "README"}},
      {"/run/systemd/network", {"10-netplan-enp1s0.link"}},
      {"/usr/lib/systemd/network", {"73-usb-net-by-mac.link", "99-default.link", "80-container-host0.network"}},
      {"/lib/systemd/network", {"73-usb-net-by-mac.link", "99-default.link"}},
  };
  EXPECT_EQ(effectiveConfFiles(dirs, ".link"), (std::vector<std::string>{
                                                   "/run/systemd/network/10-netplan-enp1s0.link",
                                                   "/etc/systemd/network/50-uplink.link",
                                                   "/usr/lib/systemd/network/73-usb-net-by-mac.link",
                                                   "/etc/systemd/network/99-default.link",
                                               }));
}

TEST(NetOwners, AnEmptyOrMaskedLinkFileAndAnEmptyMatchAreIgnored) {
  auto masked = etcLink("99-default.link", "");
  EXPECT_EQ(matchLinkFile(masked, ixgbeNic()).result, MatchResult::No);
  // link_load_one() ignores a file without [Match] settings, whatever the man page says.
  auto noMatch = etcLink("10-all.link", "[Match]\n[Link]\nRxBufferSize=1024\n");
  EXPECT_EQ(matchLinkFile(noMatch, ixgbeNic()).result, MatchResult::No);
  EXPECT_TRUE(competingOwners(withLinks({noMatch}), ixgbeNic()).owners.empty());
}

TEST(NetOwners, DropInsAddSettingsAndEmptyValuesResetThem) {
  auto def = parseLinkFile("/usr/lib/systemd/network/99-default.link", kDebian99Default);
  applyLinkDropIn(def, "/etc/systemd/network/99-default.link.d/10-rings.conf",
                  "[Link]\nRxBufferSize=8192\nTxBufferSize=8192\n");
  applyLinkDropIn(def, "/run/systemd/network/99-default.link.d/20-less.conf", "[Link]\nTxBufferSize=\n");
  EXPECT_EQ(def.dropIns.size(), 2U);
  auto r = competingOwners(withLinks({def}), ixgbeNic());
  EXPECT_EQ(describe(r),
            (std::vector<std::string>{
                "systemd-udevd /etc/systemd/network/99-default.link.d/10-rings.conf:2 rings.rx=8192 applies"}));
  // A drop-in's [Match] extends the file's.
  applyLinkDropIn(def, "/etc/systemd/network/99-default.link.d/30-only-e1000e.conf", "[Match]\nDriver=e1000e\n");
  EXPECT_EQ(matchLinkFile(def, ixgbeNic()).result, MatchResult::No);
}

TEST(NetOwners, MalformedLinkLinesAreSkippedAndParsingGoesOn) {
  auto f = etcLink("10-bad.link", R"(RxBufferSize=1
[Match]
OriginalName=*
this line has no equals sign
[Link]
RxBufferSize=0
RxBufferSize=abc
TxBufferSize=512
RxCoalesceSec=forever
RxMaxCoalescedFrames=-1
UseAdaptiveTxCoalesce=maybe
CoalescePacketRateSampleIntervalSec=0
RxChannels=4
)");
  EXPECT_FALSE(f.rejected);
  EXPECT_EQ(f.issues.size(), 8U);
  EXPECT_EQ(f.issues[0],
            (ForeignIssue{"/etc/systemd/network/10-bad.link", 1, "assignment outside of a section, skipped"}));
  EXPECT_EQ(f.issues[1].line, 4);
  EXPECT_EQ(f.issues[2].message, "RxBufferSize=0 is not \"max\" or a number from 1, skipped");
  auto r = competingOwners(withLinks({f}), ixgbeNic());
  EXPECT_EQ(describe(r), (std::vector<std::string>{
                             "systemd-udevd /etc/systemd/network/10-bad.link:8 rings.tx=512 applies",
                             "systemd-udevd /etc/systemd/network/10-bad.link:13 channels.rx=4 applies",
                         }));
  EXPECT_EQ(r.issues.size(), 8U);
}

TEST(NetOwners, ABadSectionHeaderMakesUdevRefuseTheWholeFile) {
  auto f = etcLink("10-bad.link", "[Match\nOriginalName=*\n[Link]\nRxBufferSize=1024\n");
  EXPECT_TRUE(f.rejected);
  EXPECT_EQ(matchLinkFile(f, ixgbeNic()).result, MatchResult::No);
}

TEST(NetOwners, ContinuationLinesAndCommentsFollowSystemdSyntax) {
  auto f = etcLink("10-cont.link",
                   "; a comment\n[Match]\nDriver=e1000e \\\n# dropped inside the continuation\n  ixgbe\n"
                   "[Link]\n  RxBufferSize = 2048  \n");
  EXPECT_EQ(f.match.drivers, (std::vector<std::string>{"e1000e", "ixgbe"}));
  EXPECT_EQ(matchLinkFile(f, ixgbeNic()).result, MatchResult::Yes);
  ASSERT_EQ(f.settings.size(), 1U);
  EXPECT_EQ(f.settings[0].line, 7);
  EXPECT_EQ(f.settings[0].value, "2048");
}

TEST(NetOwners, ANmcliProfileForTheInterfaceApplies) {
  auto p = parseNmKeyfile("/etc/NetworkManager/system-connections/uplink.nmconnection", kNmcliUplink);
  EXPECT_TRUE(p.wellFormed);
  EXPECT_TRUE(p.issues.empty());
  EXPECT_EQ(p.type, "ethernet");
  EXPECT_EQ(p.interfaceName, "enp1s0");
  NetOwnerSources s;
  s.nmProfiles.push_back(p);
  auto r = competingOwners(s, ixgbeNic());
  const std::string at = "NetworkManager /etc/NetworkManager/system-connections/uplink.nmconnection:";
  EXPECT_EQ(describe(r), (std::vector<std::string>{
                             at + "10 channels.combined=8 applies",
                             at + "11 coalesce.adaptive-rx=0 applies",
                             at + "12 coalesce.rx-usecs=50 applies",
                             at + "13 rings.rx=4096 applies",
                             at + "14 rings.tx=4096 applies",
                         }));
  EXPECT_EQ(r.owners[0].reason, "interface-name=enp1s0");
  auto other = ixgbeNic();
  other.name = "enp2s0";
  EXPECT_TRUE(competingOwners(s, other).owners.empty());
}

TEST(NetOwners, NmProfilesMatchByMacGenericOrRestrictedByMatch) {
  auto nic = ixgbeNic();
  auto byMac =
      parseNmKeyfile("/etc/a.nmconnection",
                     "[connection]\nid=a\ntype=802-3-ethernet\n[802-3-ethernet]\nmac-address=3C:FD:FE:A1:B2:C3\n"
                     "[ethtool]\nring-rx=1024\n");
  EXPECT_EQ(byMac.macAddress, kMac);
  EXPECT_EQ(matchNmProfile(byMac, nic).result, MatchResult::Yes);
  // The old keyfile form of the address: decimal bytes.
  auto oldForm =
      parseNmKeyfile("/etc/b", "[connection]\ntype=ethernet\n[ethernet]\nmac-address=60;253;254;161;178;195;\n");
  EXPECT_EQ(oldForm.macAddress, kMac);
  // NetworkManager compares with the permanent address; without it only an equal current one counts.
  auto unknownPerm = nic;
  unknownPerm.permanentMac.reset();
  unknownPerm.mac = "02:00:00:00:00:01";
  EXPECT_EQ(matchNmProfile(byMac, unknownPerm).result, MatchResult::Maybe);

  auto generic = parseNmKeyfile("/etc/c", "[connection]\nid=c\ntype=ethernet\n[ethtool]\nring-tx=512\n");
  auto v = matchNmProfile(generic, nic);
  EXPECT_EQ(v.result, MatchResult::Maybe);
  EXPECT_EQ(v.reason, "no interface-name or mac-address: NetworkManager may activate it on any ethernet device");

  auto restricted = parseNmKeyfile("/etc/d", "[connection]\ntype=ethernet\n[match]\ninterface-name=enp*;!enp1s0;\n");
  EXPECT_EQ(restricted.matchInterfaceName, (std::vector<std::string>{"enp*", "!enp1s0"}));
  EXPECT_EQ(matchNmProfile(restricted, nic).result, MatchResult::No);
  auto byDriver =
      parseNmKeyfile("/etc/e", "[connection]\ntype=ethernet\ninterface-name=enp1s0\n[match]\ndriver=ixgbe;\n");
  EXPECT_EQ(matchNmProfile(byDriver, nic).result, MatchResult::Yes);

  auto manual = parseNmKeyfile("/etc/f", "[connection]\ntype=ethernet\ninterface-name=enp1s0\nautoconnect=false\n");
  EXPECT_EQ(matchNmProfile(manual, nic).result, MatchResult::Maybe);

  auto bond = parseNmKeyfile("/etc/g", "[connection]\ntype=bond\ninterface-name=enp1s0\n[ethtool]\nring-rx=1\n");
  EXPECT_EQ(matchNmProfile(bond, nic).result, MatchResult::No);
  auto wifi = parseNmKeyfile("/etc/h", "[connection]\ntype=wifi\n");
  EXPECT_EQ(matchNmProfile(wifi, nic).result, MatchResult::No);

  auto denied =
      parseNmKeyfile("/etc/i", "[connection]\ntype=ethernet\n[ethernet]\nmac-address-blacklist=3C:FD:FE:A1:B2:C3;\n");
  EXPECT_EQ(matchNmProfile(denied, nic).result, MatchResult::No);
}

TEST(NetOwners, AMalformedKeyfileOnlyMayApplyAndItsBadValuesAreSkipped) {
  auto p = parseNmKeyfile("/etc/NetworkManager/system-connections/x.nmconnection",
                          "[connection]\ntype=ethernet\ninterface-name=enp1s0\nthis is not a key\n[ethtool]\n"
                          "ring-rx=lots\nring-tx=256\ncoalesce-adaptive-tx=true\nfeature-gro=false\n");
  EXPECT_FALSE(p.wellFormed);
  ASSERT_EQ(p.issues.size(), 2U);
  EXPECT_EQ(p.issues[0].line, 4);
  EXPECT_EQ(p.issues[1].message, "ring-rx=lots is not a value NetworkManager accepts, skipped");
  NetOwnerSources s;
  s.nmProfiles.push_back(p);
  auto r = competingOwners(s, ixgbeNic());
  EXPECT_EQ(describe(r),
            (std::vector<std::string>{
                "NetworkManager /etc/NetworkManager/system-connections/x.nmconnection:7 rings.tx=256 may-apply",
                "NetworkManager /etc/NetworkManager/system-connections/x.nmconnection:8 "
                "coalesce.adaptive-tx=true may-apply",
            }));
  EXPECT_EQ(r.owners[1].setting.number, 1U);
  EXPECT_EQ(r.issues.size(), 2U);
}

TEST(NetOwners, NmKeepsTheProfileOfTheHighestDirectoryPerUuidUnlessATombstoneHidesIt) {
  auto profile = [](const std::string& path, const std::string& uuid) {
    return parseNmKeyfile(path, "[connection]\ntype=ethernet\nuuid=" + uuid + "\n");
  };
  const std::string a = "11111111-2222-3333-4444-555555555555";
  const std::string b = "66666666-7777-8888-9999-000000000000";
  std::vector<NmCandidate> c = {
      {1, profile("/etc/x/a.nmconnection", a), {}},
      {0, profile("/run/x/a.nmconnection", a), {}},
      {2, profile("/usr/lib/x/b.nmconnection", b), {}},
      {1, std::nullopt, b},  // /etc/x/<b>.nmmeta -> /dev/null
      {2, profile("/usr/lib/x/no-uuid.nmconnection", ""), {}},
  };
  std::vector<std::string> paths;
  for (const auto& p : effectiveNmProfiles(c)) paths.push_back(p.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/run/x/a.nmconnection", "/usr/lib/x/no-uuid.nmconnection"}));
}

TEST(NetOwners, NmLoadsOnlyKeyfileNamesItAccepts) {
  EXPECT_TRUE(isNmKeyfileName("uplink.nmconnection", true));
  EXPECT_TRUE(isNmKeyfileName("Wired connection 1", false));
  EXPECT_FALSE(isNmKeyfileName("Wired connection 1", true));
  EXPECT_FALSE(isNmKeyfileName(".uplink.nmconnection", false));
  EXPECT_FALSE(isNmKeyfileName("uplink.nmconnection~", false));
  EXPECT_FALSE(isNmKeyfileName("uplink.Ab12Cd", false));  // g_file_set_contents() temporary
  EXPECT_FALSE(isNmKeyfileName("client.PEM", false));
  EXPECT_FALSE(isNmKeyfileName(".nmconnection", true));
  EXPECT_EQ(nmmetaUuid("11111111-2222-3333-4444-555555555555.nmmeta"), "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(nmmetaUuid("uplink.nmmeta"), "");
}

// A host with an ixgbe NIC at 0000:01:00.0 behind a root port, and the other owners' files.
void buildOwnersHost(FakeHost& h) {
  h.bridge("0000:00:1c.0");
  h.pci({"0000:01:00.0", "0000:00:1c.0", 0x8086, 0x10fb, 0x020000, "ixgbe", "fixed"});
  h.netdev("0000:01:00.0", {"enp1s0"});
  h.write("/sys/class/net/enp1s0/address", "3c:fd:fe:a1:b2:c3\n");
  h.write("/sys/class/net/enp1s0/addr_assign_type", "0\n");
  h.write("/sys/class/net/enp1s0/name_assign_type", "4\n");
  h.write("/sys/class/net/enp1s0/type", "1\n");
  h.write("/sys/class/net/enp1s0/uevent", "INTERFACE=enp1s0\nIFINDEX=2\n");
  h.symlink("../../../0000:01:00.0", "/sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0/net/enp1s0/device");

  h.write("/usr/lib/systemd/network/73-usb-net-by-mac.link", kDebian73UsbNetByMac);
  h.write("/usr/lib/systemd/network/99-default.link", kDebian99Default);
  h.symlink("../usr/lib", "/lib");
  h.write("/etc/systemd/network/99-default.link.d/rings.conf", "[Link]\nRxBufferSize=4096\n");
  h.write("/run/systemd/network/50-gone.link", "[Match]\nOriginalName=*\n[Link]\nRxBufferSize=1\n");
  h.symlink("/dev/null", "/etc/systemd/network/50-gone.link");  // masks the /run file
  std::filesystem::create_directories(h.root() / "etc/systemd/network/60-dir.link");

  const std::string etc = "/etc/NetworkManager/system-connections/";
  h.write(etc + "uplink.nmconnection", kNmcliUplink);
  h.write(etc + "open.nmconnection",
          "[connection]\ntype=ethernet\ninterface-name=enp1s0\n[ethtool]\nring-tx=1\n");  // 0644: NM skips it
  h.write("/run/NetworkManager/system-connections/uplink.nmconnection",
          std::string(kNmcliUplink) + "\n[ethtool]\nring-rx=8192\n");  // same UUID: shadows /etc
  h.write("/usr/lib/NetworkManager/system-connections/vendor.nmconnection",
          "[connection]\nuuid=66666666-7777-8888-9999-000000000000\ntype=ethernet\n[ethtool]\nring-rx=2\n");
  h.symlink("/dev/null", etc + "66666666-7777-8888-9999-000000000000.nmmeta");
  for (const auto* f : {"etc/NetworkManager/system-connections/uplink.nmconnection",
                        "run/NetworkManager/system-connections/uplink.nmconnection",
                        "usr/lib/NetworkManager/system-connections/vendor.nmconnection"}) {
    ::chmod((h.root() / f).c_str(), 0600);
  }
}

core::PciDevice ixgbeDevice() {
  core::PciDevice d;
  d.address = "0000:01:00.0";
  d.driver = "ixgbe";
  return d;
}

// Reads the owners as nobody (or as the user running the test, who is not root either): 0 when the
// unreadable files are reported as unknown, 1 otherwise.
int readAsNobody(const FakeHost& h) {
  if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 2;
  adapters::sysfs::Root root(h.rootString());
  auto sources = adapters::sysfs::readNetOwnerSources(root);
  std::vector<std::string> unknown;
  for (const auto& u : sources.unreadable) unknown.push_back(u.path);
  // The 0600 keyfiles of /run and /usr/lib are root's too.
  bool ok = unknown == std::vector<std::string>{"/run/NetworkManager/system-connections/uplink.nmconnection",
                                                "/etc/NetworkManager/system-connections",
                                                "/usr/lib/NetworkManager/system-connections/vendor.nmconnection",
                                                "/etc/systemd/network/10-secret.link"};
  ok = ok && !sources.linkFiles.empty() && !sources.linkFiles[0].readable;
  core::NetDev netdev;
  netdev.name = "enp1s0";
  auto r = competingOwners(sources, adapters::sysfs::readNicIdentity(root, ixgbeDevice(), netdev));
  ok = ok && r.unknown.size() == 4 && r.owners.size() == 1 && r.owners[0].certainty == Certainty::MayApply;
  if (!ok) {
    for (const auto& u : unknown) std::cerr << "unknown: " << u << "\n";
    for (const auto& d : describe(r)) std::cerr << d << "\n";
  }
  return ok ? 0 : 1;
}

TEST(NetOwnersReader, ReadsBothOwnersInTheirOrderFromASyntheticRoot) {
  FakeHost h;
  buildOwnersHost(h);
  adapters::sysfs::Root root(h.rootString());
  auto sources = adapters::sysfs::readNetOwnerSources(root);
  EXPECT_TRUE(sources.unreadable.empty());
  std::vector<std::string> links;
  for (const auto& f : sources.linkFiles) links.push_back(f.path);
  EXPECT_EQ(links, (std::vector<std::string>{"/etc/systemd/network/50-gone.link",
                                             "/usr/lib/systemd/network/73-usb-net-by-mac.link",
                                             "/usr/lib/systemd/network/99-default.link"}));
  ASSERT_EQ(sources.nmProfiles.size(), 1U);
  EXPECT_EQ(sources.nmProfiles[0].path, "/run/NetworkManager/system-connections/uplink.nmconnection");

  core::NetDev netdev;
  netdev.name = "enp1s0";
  netdev.mac = "3c:fd:fe:a1:b2:c3";
  auto nic = adapters::sysfs::readNicIdentity(root, ixgbeDevice(), netdev);
  EXPECT_EQ(nic.mac, kMac);
  EXPECT_EQ(nic.permanentMac, kMac);
  EXPECT_EQ(nic.originalName, std::nullopt);  // renamed by udev
  EXPECT_EQ(nic.driver, "ixgbe");
  EXPECT_EQ(nic.type, "ether");
  EXPECT_EQ(nic.idPath, "pci-0000:01:00.0");

  auto r = competingOwners(sources, nic);
  const std::string run = "NetworkManager /run/NetworkManager/system-connections/uplink.nmconnection:";
  EXPECT_EQ(describe(r), (std::vector<std::string>{
                             run + "10 channels.combined=8 applies",
                             run + "11 coalesce.adaptive-rx=0 applies",
                             run + "12 coalesce.rx-usecs=50 applies",
                             run + "26 rings.rx=8192 applies",
                             run + "14 rings.tx=4096 applies",
                             "systemd-udevd /etc/systemd/network/99-default.link.d/rings.conf:2 rings.rx=4096 applies",
                         }));
}

// On an arm64 device-tree host the PCI host bridge hangs below a platform device (QEMU's virt:
// /sys/devices/platform/4010000000.pcie/pci0000:00): udev's path_id prepends "platform-<name>-",
// and a .link file's Path= matches that, not a bare "pci-...".
TEST(NetOwnersReader, IdPathOfANicBehindAPlatformHostBridgeAsOnArm64DeviceTreeHosts) {
  FakeHost h;
  const std::string dev = "/sys/devices/platform/4010000000.pcie/pci0000:00/0000:00:02.0";
  h.write(dev + "/net/eth0/type", "1\n");
  h.symlink("../../devices/platform/4010000000.pcie/pci0000:00/0000:00:02.0/net/eth0", "/sys/class/net/eth0");
  adapters::sysfs::Root root(h.rootString());
  core::PciDevice d;
  d.address = "0000:00:02.0";
  d.driver = "e1000e";
  core::NetDev netdev;
  netdev.name = "eth0";
  netdev.mac = "52:54:00:12:34:56";
  EXPECT_EQ(adapters::sysfs::readNicIdentity(root, d, netdev).idPath, "platform-4010000000.pcie-pci-0000:00:02.0");
  // Nested platform devices: path_id names the one right above the host bridge only.
  FakeHost nested;
  const std::string soc = "/sys/devices/platform/soc/10000000.pcie/pci0000:00/0000:00:02.0";
  nested.write(soc + "/net/eth0/type", "1\n");
  nested.symlink("../../devices/platform/soc/10000000.pcie/pci0000:00/0000:00:02.0/net/eth0", "/sys/class/net/eth0");
  EXPECT_EQ(adapters::sysfs::readNicIdentity(adapters::sysfs::Root(nested.rootString()), d, netdev).idPath,
            "platform-10000000.pcie-pci-0000:00:02.0");
}

TEST(NetOwnersReader, ReportsWhatItCannotReadAsUnknown) {
  FakeHost h;
  buildOwnersHost(h);
  h.write("/etc/systemd/network/10-secret.link", "[Match]\nOriginalName=*\n[Link]\nRxBufferSize=64\n");
  // Mode 0: unreadable by anyone but root, so the same files are unknown whoever runs the test (a
  // 0600 file is readable by its owner). Root reads everything: as root the check runs as nobody in
  // a child, and reports through its exit code.
  const std::vector<std::string> hidden = {
      "etc/systemd/network/10-secret.link", "run/NetworkManager/system-connections/uplink.nmconnection",
      "usr/lib/NetworkManager/system-connections/vendor.nmconnection", "etc/NetworkManager/system-connections"};
  for (const auto& f : hidden) ASSERT_EQ(::chmod((h.root() / f).c_str(), 0), 0) << f;
  ::chmod(h.root().c_str(), 0755);
  EXPECT_EXIT(std::exit(readAsNobody(h)), ::testing::ExitedWithCode(0), "");
  ::chmod((h.root() / hidden.back()).c_str(), 0700);  // so that the host can be removed
}

}  // namespace net_owners_test
