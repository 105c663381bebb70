#pragma once

#include <memory>

#include "support/fake_host.hpp"

namespace iommud::bench {

/// What the synthetic host holds, for the benchmark's header line.
struct HostShape {
  int devices = 0;
  int groups = 0;
  int netdevs = 0;
  int nvmeControllers = 0;
};

/// A large server-like host: `groups` IOMMU groups of four PCI functions each (a bridge and the
/// three functions behind it), spread over PCI domains of 128 groups. A quarter of the groups
/// hold a three-port NIC, a quarter an NVMe drive with two SR-IOV virtual functions, a quarter a
/// GPU with its HDMI audio and USB-C controller, a quarter accelerators (one bound to vfio-pci,
/// one unbound). Every function has the six attributes the floor loop reads.
std::unique_ptr<testing::FakeHost> makeSyntheticHost(int groups, HostShape& shape);

}  // namespace iommud::bench
