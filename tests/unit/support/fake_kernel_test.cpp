// The fake kernel is as strict as Linux where iommud's writes meet it: a driver that does not
// match the device, a module parameter its type's parser refuses, a type write of a group of
// several devices before 6.4 (docs/kernel.md §2.2, §7).
#include "support/fake_kernel.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>

#include "support/scenarios.hpp"

namespace fake_kernel_test {

using namespace iommud;
using namespace iommud::testing;

int errorOf(const core::Result<core::Done>& r) {
  return r ? 0 : r.error().code;
}

std::string readOf(const FakeHost& h, const std::string& path) {
  std::ifstream in(h.root() / path.substr(1));
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(FakeKernel, BindingADriverThatDoesNotMatchTheDeviceIsEnodev) {
  auto h = twoNvmeOneGroup("6.12.48-1");
  FakeKernel k(h->root(), {6, 12, 48});
  ASSERT_EQ(errorOf(k.write("/sys/bus/pci/drivers/nvme/unbind", "0000:03:00.0")), 0);
  EXPECT_EQ(errorOf(k.write("/sys/bus/pci/drivers/pcieport/bind", "0000:03:00.0")), ENODEV);
  EXPECT_EQ(errorOf(k.write("/sys/bus/pci/drivers/nvme/bind", "0000:03:00.0")), 0);
  EXPECT_EQ(errorOf(k.write("/sys/bus/pci/drivers/nvme/bind", "0000:03:00.0")), EBUSY);     // bound already
  EXPECT_EQ(errorOf(k.write("/sys/bus/pci/drivers/nvme/bind", "0000:09:00.0")), ENODEV);    // no such device
  EXPECT_EQ(errorOf(k.write("/sys/bus/pci/drivers/nvme/unbind", "0000:02:08.0")), ENODEV);  // not nvme's
}

TEST(FakeKernel, AModuleParameterIsParsedAsItsTypeIs) {
  auto h = thunderboltNicWithModule();
  FakeKernel k(h->root(), {6, 12, 48});
  const std::string itr = "/sys/module/atlantic/parameters/aq_itr";  // uint
  EXPECT_EQ(errorOf(k.write(itr, "banana")), EINVAL);
  EXPECT_EQ(errorOf(k.write(itr, "-1")), EINVAL);
  EXPECT_EQ(errorOf(k.write(itr, "4294967296")), ERANGE);
  EXPECT_EQ(errorOf(k.write(itr, "")), EINVAL);
  EXPECT_EQ(errorOf(k.write(itr, "0x10\n")), 0);
  EXPECT_EQ(readOf(*h, itr), "16\n");
  k.declareParam("/sys/module/atlantic/parameters/aq_itr", {FakeKernel::ParamType::Uint, std::pair{0LL, 0x1ffLL}});
  EXPECT_EQ(errorOf(k.write(itr, "512")), EINVAL);  // a custom setter's range
  h->write("/sys/module/atlantic/parameters/flag", "N\n");
  EXPECT_EQ(errorOf(k.write("/sys/module/atlantic/parameters/flag", "maybe")), EINVAL);
  EXPECT_EQ(errorOf(k.write("/sys/module/atlantic/parameters/flag", "on")), 0);
  EXPECT_EQ(readOf(*h, "/sys/module/atlantic/parameters/flag"), "Y\n");
}

TEST(FakeKernel, BeforeLinux64ALiveChangeOfAGroupOfSeveralDevicesIsEinval) {
  auto h = twoNvmeOneGroup("6.1.140-1");
  h->write("/sys/kernel/iommu_groups/20/type", "DMA\n");
  FakeKernel old(h->root(), {6, 1, 140});
  EXPECT_EQ(errorOf(old.write("/sys/kernel/iommu_groups/20/type", "DMA-FQ")), EINVAL);
  EXPECT_EQ(readOf(*h, "/sys/kernel/iommu_groups/20/type"), "DMA\n");
  FakeKernel current(h->root(), {6, 12, 48});
  EXPECT_EQ(errorOf(current.write("/sys/kernel/iommu_groups/20/type", "DMA-FQ")), 0);
  EXPECT_EQ(readOf(*h, "/sys/kernel/iommu_groups/20/type"), "DMA-FQ\n");
}

}  // namespace fake_kernel_test
