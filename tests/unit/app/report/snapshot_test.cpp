#include "app/report/snapshot.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/report/status_report.hpp"
#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace snapshot_test {

using namespace iommud;
using namespace iommud::testing;
using adapters::snapshot::TarEntry;
namespace fs = std::filesystem;

std::vector<TarEntry> capture(const FakeHost& h, app::Redactor* redactor) {
  adapters::sysfs::Recorder rec;
  auto host = adapters::sysfs::readHost(adapters::sysfs::Root(h.rootString(), &rec));
  if (!host) throw std::runtime_error(host.error().describe());
  return app::snapshotEntries(rec.captures(), redactor);
}

// Lays entries out in a fresh directory the way `tar -x` would.
void unpack(const std::vector<TarEntry>& entries, const fs::path& dir) {
  for (const auto& e : entries) {
    fs::path p = dir / e.path;
    switch (e.kind) {
      case TarEntry::Kind::Dir: fs::create_directories(p); break;
      case TarEntry::Kind::File:
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << e.data;
        break;
      case TarEntry::Kind::Symlink:
        fs::create_directories(p.parent_path());
        fs::create_symlink(e.data, p);
        break;
    }
  }
}

const TarEntry* entry(const std::vector<TarEntry>& entries, const std::string& path) {
  for (const auto& e : entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

TEST(Snapshot, AnUnpackedSnapshotGivesTheSameStatus) {
  std::vector<std::unique_ptr<FakeHost>> hosts;
  hosts.push_back(intelBareMetal());
  hosts.push_back(thunderboltNic());
  hosts.push_back(twoNvmeOneGroup());
  hosts.push_back(vfioGroup());
  hosts.push_back(amdOldFeatures());
  hosts.push_back(noIommu());
  for (const auto& h : hosts) {
    FakeHost out;  // a fresh temporary directory
    fs::remove_all(out.root());
    unpack(capture(*h, nullptr), out.root());
    EXPECT_EQ(app::statusJson(statusOf(out)), app::statusJson(statusOf(*h))) << h->rootString();
  }
}

TEST(Snapshot, FilesBelowLinksAreStoredWhereTheLinksPoint) {
  auto entries = capture(*intelBareMetal(), nullptr);
  const auto* link = entry(entries, "sys/bus/pci/devices/0000:01:00.0");
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->kind, TarEntry::Kind::Symlink);
  EXPECT_EQ(link->data, "../../../devices/pci0000:00/0000:00:1d.0/0000:01:00.0");
  EXPECT_NE(entry(entries, "sys/devices/pci0000:00/0000:00:1d.0/0000:01:00.0/uevent"), nullptr);
  EXPECT_EQ(entry(entries, "sys/bus/pci/devices/0000:01:00.0/uevent"), nullptr);
  // Only what status reads: no vendor file (uevent carries the ids).
  EXPECT_EQ(entry(entries, "sys/devices/pci0000:00/0000:00:1d.0/0000:01:00.0/vendor"), nullptr);
}

// A path the read looked for and did not find is recorded as missing, and a snapshot stores
// nothing for it (nor a directory above it that nothing else put there).
TEST(Snapshot, StoresNothingForAPathLookedForAndNotThere) {
  const auto host = intelBareMetal();
  adapters::sysfs::Recorder rec;
  const adapters::sysfs::Root root(host->rootString(), &rec);
  ASSERT_TRUE(root.readFile("/proc/cmdline"));
  rec = {};
  ASSERT_FALSE(root.readFile("/sys/nowhere/at/all"));
  ASSERT_FALSE(root.readLink("/sys/nowhere/link"));
  ASSERT_FALSE(root.listDir("/sys/nowhere/dir"));
  ASSERT_EQ(rec.captures().size(), 3U);
  for (const auto& c : rec.captures()) EXPECT_EQ(c.kind, adapters::sysfs::Capture::Kind::Missing) << c.path;
  EXPECT_TRUE(app::snapshotEntries(rec.captures(), nullptr).empty());
}

TEST(Snapshot, RedactsSerialsPathsAddressesAndNonIommuArgumentsConsistently) {
  auto h = intelBareMetal();
  h->cmdline(
      "BOOT_IMAGE=/vmlinuz root=UUID=5d2c0f1e ro nfsroot=10.0.0.1:/srv/alice intel_iommu=on iommu.strict=1 "
      "quiet -- --secret=alice");
  h->write("/sys/class/net/eno1/address", "3c:ec:ef:12:34:56\n");
  app::Redactor r;
  auto entries = capture(*h, &r);
  auto cmdline = entry(entries, "proc/cmdline")->data;
  // Every non-IOMMU value is a token; the IOMMU options and bare flags stay.
  for (const char* gone : {"vmlinuz", "5d2c0f1e", "10.0.0.1", "alice"}) {
    EXPECT_EQ(cmdline.find(gone), std::string::npos) << gone << " in " << cmdline;
  }
  for (const char* kept : {"BOOT_IMAGE=REDACTED-", " root=REDACTED-", " ro ", " nfsroot=REDACTED-",
                           " intel_iommu=on iommu.strict=1 quiet -- --secret=REDACTED-"}) {
    EXPECT_NE(cmdline.find(kept), std::string::npos) << kept << " not in " << cmdline;
  }
  const auto* serial = entry(entries, "sys/devices/pci0000:00/0000:00:1d.0/0000:01:00.0/nvme/nvme0/serial");
  ASSERT_NE(serial, nullptr);
  EXPECT_EQ(serial->data.find("S4EWNX0N123456A"), std::string::npos);
  EXPECT_TRUE(serial->data.starts_with("REDACTED-"));
  bool sawMac = false;
  for (const auto& e : entries) {
    if (e.path.ends_with("/net/eno1/address")) {
      sawMac = true;
      EXPECT_TRUE(e.data.starts_with("REDACTED-")) << e.data;
    }
  }
  EXPECT_TRUE(sawMac);
  auto mounts = entry(entries, "proc/self/mountinfo")->data;
  EXPECT_EQ(mounts.find("alice"), std::string::npos);
  EXPECT_NE(mounts.find(" / / "), std::string::npos);  // the root mount point stays
  EXPECT_NE(mounts.find("/dev/nvme0n1p2"), std::string::npos);
  auto route = entry(entries, "proc/net/route")->data;
  EXPECT_EQ(route.find("0102A8C0"), std::string::npos);
  EXPECT_NE(route.find("00000000"), std::string::npos);  // the default route stays recognisable
  EXPECT_EQ(entry(entries, "proc/net/if_inet6")->data.find("3a2c4afffe0c1d2e"), std::string::npos);
}

TEST(Snapshot, ARedactedSnapshotStillGivesTheSameFindingsAndUse) {
  auto h = intelBareMetal();
  app::Redactor r;
  FakeHost out;
  fs::remove_all(out.root());
  unpack(capture(*h, &r), out.root());
  auto original = nlohmann::ordered_json::parse(app::statusJson(statusOf(*h)));
  auto redacted = nlohmann::ordered_json::parse(app::statusJson(statusOf(out)));
  EXPECT_EQ(redacted["findings"], original["findings"]);
  EXPECT_EQ(redacted["groups"], original["groups"]);
  EXPECT_EQ(redacted["iommu"], original["iommu"]);
  EXPECT_EQ(redacted["devices"].size(), original["devices"].size());
  EXPECT_EQ(redacted["devices"][3]["in_use"], true);
}

TEST(Redactor, KeepsTheKernelBuilderOutOfProcVersion) {
  app::Redactor r;
  EXPECT_EQ(r.procVersion("Linux version 6.8.0 (alice@laptop) (gcc 13 (Debian 13.2)) #1 SMP Debian 6.8.0-1"),
            "Linux version 6.8.0 (REDACTED-1@REDACTED-2) (gcc 13 (Debian 13.2)) #1 SMP Debian 6.8.0-1");
  EXPECT_EQ(r.procVersion("Linux version 6.1 (debian-kernel@lists.debian.org) (gcc-12) #1"),
            "Linux version 6.1 (REDACTED-3@REDACTED-4) (gcc-12) #1");
  EXPECT_EQ(r.procVersion("unbalanced (x@y"), "unbalanced (x@y");
}

TEST(Tar, EncodesMembersThatGnuTarCanRead) {
  std::string longName(180, 'a');
  auto bytes = adapters::snapshot::encodeTar({{TarEntry::Kind::Dir, "sys", "", 0755},
                                              {TarEntry::Kind::File, "sys/x", "hello\n", 0644},
                                              {TarEntry::Kind::Symlink, "sys/l", "x", 0777},
                                              {TarEntry::Kind::File, "sys/" + longName, "long", 0644}},
                                             0);
  EXPECT_EQ(bytes.size() % 512, 0U);
  EXPECT_EQ(bytes.substr(257, 5), "ustar");
  EXPECT_NE(bytes.find("././@LongLink"), std::string::npos);
  fs::path dir = fs::temp_directory_path() / "iommud-tar-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "t.tar", std::ios::binary) << bytes;
  ASSERT_EQ(std::system(("tar -xf " + (dir / "t.tar").string() + " -C " + dir.string()).c_str()), 0);
  std::ifstream in(dir / "sys" / longName);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "long");
  EXPECT_EQ(fs::read_symlink(dir / "sys/l"), "x");
  fs::remove_all(dir);
}

}  // namespace snapshot_test
