#include <gtest/gtest.h>

#include "core/host.hpp"

namespace device_identity_test {

using iommud::core::isPciAddress;
using iommud::core::NetDev;
using iommud::core::NvmeController;
using iommud::core::PciDevice;
using iommud::core::pciFunctionOf;

TEST(DeviceIdentity, ANicIsKnownByItsIdsAndMacWhateverItsAddress) {
  PciDevice a;
  a.address = "0000:05:00.0";
  a.vendorId = 0x1d6a;
  a.deviceId = 0x00b1;
  a.subsystemVendorId = 0x1d6a;
  a.subsystemDeviceId = 0x0001;
  a.netdevs.push_back(NetDev{.name = "enp5s0", .mac = "00:17:b6:00:00:01"});
  PciDevice b = a;
  b.address = "0000:07:00.0";
  b.netdevs.front().name = "enp7s0";
  EXPECT_EQ(a.identity(), "1d6a:00b1/1d6a:0001 mac 00:17:b6:00:00:01");
  EXPECT_EQ(a.identity(), b.identity());
  b.netdevs.front().mac = "00:17:b6:00:00:02";
  EXPECT_NE(a.identity(), b.identity());
}

TEST(DeviceIdentity, AnNvmeIsKnownByItsSerialAndADeviceWithoutOneByItsIds) {
  PciDevice d;
  d.vendorId = 0x144d;
  d.deviceId = 0xa808;
  EXPECT_EQ(d.identity(), "144d:a808/0000:0000");
  d.nvme.push_back(NvmeController{.name = "nvme0", .serial = "S4EWNX0R123"});
  EXPECT_EQ(d.identity(), "144d:a808/0000:0000 serial S4EWNX0R123");
}

TEST(DeviceIdentity, AUdevDevpathBelongsToItsLastPciFunction) {
  EXPECT_EQ(pciFunctionOf("/devices/pci0000:00/0000:00:1c.0/0000:05:00.0/net/enp5s0"), "0000:05:00.0");
  EXPECT_EQ(pciFunctionOf("/devices/pci0000:00/0000:00:1d.0/0000:3a:00.0/nvme/nvme0/nvme0n1/nvme0n1p2"),
            "0000:3a:00.0");
  EXPECT_EQ(pciFunctionOf("/devices/pci0000:00/0000:00:02.0"), "0000:00:02.0");
  EXPECT_EQ(pciFunctionOf("/devices/virtual/net/veth0"), "");
  EXPECT_EQ(pciFunctionOf("/devices/virtual/block/loop0"), "");
  EXPECT_TRUE(isPciAddress("0000:05:00.0"));
  EXPECT_FALSE(isPciAddress("pci0000:00"));
  EXPECT_FALSE(isPciAddress("0000:05:00"));
}

}  // namespace device_identity_test
