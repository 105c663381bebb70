#pragma once

#include "adapters/sysfs/root.hpp"
#include "core/host.hpp"
#include "core/net_owners.hpp"

namespace iommud::adapters::sysfs {

/// Reads NetworkManager keyfiles (/run, /etc, /usr/lib NetworkManager/system-connections) and
/// systemd .link files with their drop-ins (/etc, /run, /usr/local/lib, /usr/lib, /lib
/// systemd/network) under the root, in the order their programs use them. Never fails: what exists
/// but cannot be read lands in `unreadable`, lines that cannot be understood are skipped and noted.
core::NetOwnerSources readNetOwnerSources(const Root& root);

/// What sysfs tells of a NIC that .link files and NetworkManager profiles match on: MAC (and, when
/// the kernel says the address is the permanent one, the permanent MAC), the kernel's original
/// name if it was not renamed, driver, type, udev's ID_PATH and ID_BUS.
core::NicIdentity readNicIdentity(const Root& root, const core::PciDevice& device, const core::NetDev& netdev);

}  // namespace iommud::adapters::sysfs
