#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.hpp"
#include "core/names.hpp"
#include "core/result.hpp"

// DMA mapping work per device, from the kernel's histogram triggers (docs/measure.md,
// docs/kernel.md §10). Pure: text in, numbers out; the interval's length is an argument.

namespace iommud::core {

/// One entry of a tracefs `hist` file: the key's value as text and the sums by field name
/// ("hitcount", "size").
struct HistEntry {
  std::string key;
  std::map<std::string, uint64_t, std::less<>> values;
};

/// A whole `hist` file of a single-key trigger.
struct Hist {
  std::string keyField;  // "device", "dev_name", "common_type"; empty when there is no entry
  std::vector<HistEntry> entries;
  uint64_t hits = 0;
  uint64_t dropped = 0;  // events not counted: the table was full
};

/// Parses a `hist` file. An error names the line (1-based) and what was wrong with it.
Result<Hist> parseHist(std::string_view text);

/// One field of an event's `format` file.
struct EventField {
  std::string name;  // "device"
  std::string type;  // "__data_loc char[]", "size_t"
};

/// An event's `format` file: its name, id and fields (common_* ones included).
struct EventFormat {
  std::string name;
  int id = 0;
  std::vector<EventField> fields;

  [[nodiscard]] bool has(std::string_view field) const;
};
Result<EventFormat> parseEventFormat(std::string_view text);

/// The events iommud counts.
enum class DmaEvent { MapPage, UnmapPage, MapSg, UnmapSg, Bounced, PageFault, IommuMap, IommuUnmap };
inline constexpr std::size_t kDmaEventCount = 8;

/// How one event is counted: where it lives in tracefs, the trigger, and the fields the trigger
/// needs (checked against the event's `format` before it is armed).
struct DmaEventSpec {
  DmaEvent event;
  std::string_view system;  // "dma"
  std::string_view name;    // "dma_map_page"
  /// Its name from Linux 6.18 on, where it was renamed ("dma_map_phys"); empty when it never was.
  /// docs/kernel.md §10: counted under whichever of the two names the kernel has.
  std::string_view renamed;
  std::string_view key;    // "device"
  std::string_view value;  // the summed field besides hitcount ("size"); empty for none
  /// Whether it names a device (host-wide events are keyed by common_type: one bucket).
  [[nodiscard]] bool perDevice() const { return key != "common_type"; }
  /// The names to look for, the newest first (one when it was never renamed).
  [[nodiscard]] std::vector<std::string_view> names() const;
  /// "hist:keys=device:vals=hitcount,size"
  [[nodiscard]] std::string trigger() const;
};
const std::array<DmaEventSpec, kDmaEventCount>& dmaEventSpecs();
const DmaEventSpec& specOf(DmaEvent event);
/// The fields of `spec` that `format` lacks (empty: the trigger can be armed).
std::vector<std::string> missingFields(const DmaEventSpec& spec, const EventFormat& format);

/// Cumulative counts for one device since the triggers were armed.
struct DeviceDmaCounters {
  uint64_t maps = 0;         // dma_map_page + dma_map_sg
  uint64_t mappedBytes = 0;  // dma_map_page's sizes (a scatter-gather map carries no byte sum)
  uint64_t unmaps = 0;       // dma_unmap_page + dma_unmap_sg
  uint64_t sgMaps = 0;
  uint64_t sgEntries = 0;
  uint64_t bounces = 0;
  uint64_t bouncedBytes = 0;
  uint64_t faults = 0;

  bool operator==(const DeviceDmaCounters&) const = default;
};

/// Host-wide counts of IOMMU page-table work (iommu:map/unmap carry no device).
struct HostIommuCounters {
  uint64_t maps = 0;
  uint64_t mappedBytes = 0;
  uint64_t unmaps = 0;
  uint64_t unmappedBytes = 0;

  bool operator==(const HostIommuCounters&) const = default;
};

/// Everything read at one moment: which events are armed, and their sums.
struct DmaReading {
  std::set<DmaEvent> armed;
  std::map<std::string, DeviceDmaCounters, std::less<>> devices;  // by device name ("0000:01:00.0")
  HostIommuCounters host;
  uint64_t dropped = 0;  // over all tables

  bool operator==(const DmaReading&) const = default;
};

/// Folds the parsed `hist` files of the armed events into one reading.
DmaReading readingFromHists(const std::map<DmaEvent, Hist>& hists);

/// Whether the maps of a reading are attributed to devices (the dma:* events exist: 6.12+).
bool attributesMaps(const DmaReading& reading);

/// One device's work over an interval: the differences and the rates derived from them.
struct DeviceDmaDelta {
  std::string device;
  DeviceDmaCounters delta;
  double mapsPerSecond = 0;
  double unmapsPerSecond = 0;
  double mappedMiBPerSecond = 0;
  double bouncesPerSecond = 0;
  std::optional<double> meanMapBytes;  // bytes per single-page map; none without such maps
};

struct DmaInterval {
  double seconds = 0;
  bool mapsAttributed = false;          // false: the kernel has no dma:* events (before 6.12)
  bool restarted = false;               // a counter went backwards: the triggers were re-armed
  std::vector<DeviceDmaDelta> devices;  // by device name
  HostIommuCounters host;
  double hostMapsPerSecond = 0;
  double hostUnmapsPerSecond = 0;
  uint64_t dropped = 0;  // events lost in this interval because a table was full
};

/// The work between two readings `seconds` apart. A counter that went backwards restarted (the
/// triggers were armed again): its new value is the interval's. A device first seen in `after`
/// counts from zero.
DmaInterval diffReadings(const DmaReading& before, const DmaReading& after, double seconds);

/// What a device's row says about the device, from the host's facts.
struct DmaRow {
  DeviceDmaDelta dma;
  std::string name;    // "nvme0"; the address when there is no better name
  std::string driver;  // empty when none is bound
  std::optional<int> group;
  std::optional<DomainType> domain;
  /// Whether its DMA goes through translation: the group's type (docs/kernel.md §1.2); false
  /// without a group (no IOMMU in front of it); none when the type could not be read.
  std::optional<bool> translated;
  bool untrusted = false;
  bool present = true;  // false: counted, but no longer on the host (unplugged)
};

/// One row per PCI function of the host (zeros for those without work) and one per counted
/// device the host no longer has; sorted by device name.
std::vector<DmaRow> dmaRows(const DmaInterval& interval, const HostFacts& host);

enum class DmaSortKey { Maps, MiB, MeanSize, Bounces, Faults, Device };
/// The names of `iommuctl top --sort`.
inline constexpr Names<DmaSortKey, 6> kDmaSortKeyNames{{{DmaSortKey::Maps, "maps"},
                                                        {DmaSortKey::MiB, "mib"},
                                                        {DmaSortKey::MeanSize, "mean-size"},
                                                        {DmaSortKey::Bounces, "bounces"},
                                                        {DmaSortKey::Faults, "faults"},
                                                        {DmaSortKey::Device, "device"}}};
static_assert(checkNames(kDmaSortKeyNames, DmaSortKey::Device));
/// Most work first (Device: by name); ties by device name.
void sortRows(std::vector<DmaRow>& rows, DmaSortKey key);

}  // namespace iommud::core
