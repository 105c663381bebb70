#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"

namespace iommud::core {

/// /proc/self/mountinfo: "36 35 259:2 / /home rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw".
std::vector<Mount> parseMountInfo(std::string_view text);

/// /proc/swaps: the device names of swap partitions ("/dev/nvme0n1p3" -> "nvme0n1p3").
std::vector<std::string> parseSwaps(std::string_view text);

/// Interfaces that carry a route: /proc/net/route (IPv4) and /proc/net/ipv6_route (IPv6).
/// The loopback routes of ipv6_route ("lo") and "*" are left out.
std::set<std::string> parseRouteInterfaces(std::string_view ipv4, std::string_view ipv6);

/// /proc/net/if_inet6: interfaces that have an IPv6 address other than link-local.
std::set<std::string> parseGlobalInet6Interfaces(std::string_view text);

/// Kernel config lines: "CONFIG_X=y" and "# CONFIG_X is not set" (stored as "n"). Only symbols
/// for which keep(name) is true are kept.
std::map<std::string, std::string> parseKconfig(std::string_view text, bool (*keep)(std::string_view name));

/// The config symbols iommud explains: IOMMU, SMMU, DMA-remapping and swiotlb ones.
bool isIommuConfigSymbol(std::string_view name);

/// The confidential guest /proc/cpuinfo's first `flags` line tells (docs/kernel.md §4.3):
/// `tdx_guest` is TDX; `sev_snp`, `sev_es` or `sev` beside `hypervisor` a SEV guest (a host that
/// can run SEV guests has them without `hypervisor`). Unknown without a flags line.
Confidential parseConfidential(std::string_view cpuinfo);

}  // namespace iommud::core
