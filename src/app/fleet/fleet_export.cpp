#include "app/fleet/fleet_export.hpp"

#include <map>
#include <utility>
#include <vector>

#include "app/change/outcome_log.hpp"

namespace iommud::app {

void Counters::add(std::string_view key) {
  const std::pair<std::string_view, uint64_t*> counters[] = {{"done", &done},         {"advised", &advised},
                                                             {"refused", &refused},   {"failed", &failed},
                                                             {"reverted", &reverted}, {"revert-failed", &revertFailed},
                                                             {"drift", &drift}};
  for (const auto& [name, value] : counters) {
    if (name == key) ++*value;
  }
}

Counters& Counters::operator+=(const Counters& other) {
  done += other.done;
  advised += other.advised;
  refused += other.refused;
  failed += other.failed;
  reverted += other.reverted;
  revertFailed += other.revertFailed;
  drift += other.drift;
  return *this;
}

std::optional<std::string_view> counterKey(const Outcome& o, bool revert) {
  using R = Outcome::Result;
  switch (o.result) {
    case R::Done: return revert ? "reverted" : "done";
    case R::Failed: return revert ? "revert-failed" : "failed";
    case R::Drift: return "drift";
    case R::Advised: return "advised";
    case R::Refused:
    case R::Skipped:
      if (isRefusal(o)) return "refused";
      break;
    case R::Kept:
    case R::Lost: break;
  }
  return std::nullopt;
}

namespace {

constexpr std::string_view kTimestamp = "iommud_last_update_timestamp_seconds";

// The text format's label value escapes: backslash, double quote, line feed.
std::string escaped(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

/// One metric family, written only when it has samples.
class Family {
 public:
  Family(std::string_view name, std::string_view type, std::string_view help) : name_(name) {
    head_ = "# HELP " + name_ + ' ' + std::string(help) + "\n# TYPE " + name_ + ' ' + std::string(type) + '\n';
  }
  // `labels`: name, value pairs.
  Family& sample(const std::vector<std::pair<std::string_view, std::string>>& labels, uint64_t value) {
    samples_ += name_;
    for (size_t i = 0; i < labels.size(); ++i) {
      samples_ += (i == 0 ? "{" : ",") + std::string(labels[i].first) + "=\"" + escaped(labels[i].second) + '"';
    }
    samples_ += (labels.empty() ? " " : "} ") + std::to_string(value) + '\n';
    return *this;
  }
  void to(std::string& out) const {
    if (!samples_.empty()) out += head_ + samples_;
  }

 private:
  std::string name_, head_, samples_;
};

// The per-device DMA counters (docs/metrics.md "DMA counters"): one series per device the
// kernel counted work for, so bounded by the host's PCI functions that do DMA.
void dmaFamilies(const core::DmaReading& dma, const core::HostFacts& host, std::string& out) {
  Family maps("iommud_dma_maps_total", "counter",
              "DMA API mappings (dma_map_page and dma_map_sg) a device made since iommud began measuring (6.12 and "
              "later: the dma:* tracepoints).");
  Family bytes("iommud_dma_mapped_bytes_total", "counter",
               "Bytes a device mapped with dma_map_page since measuring began.");
  Family unmaps("iommud_dma_unmaps_total", "counter", "DMA API unmappings a device made since measuring began.");
  Family bounces("iommud_swiotlb_bounces_total", "counter",
                 "Mappings of a device bounced through swiotlb since measuring began (untrusted devices' sub-page "
                 "mappings, devices that cannot reach the buffer).");
  Family faults("iommud_iommu_faults_total", "counter", "IOMMU page faults of a device since measuring began.");
  const bool attributed = core::attributesMaps(dma);
  for (const auto& [address, c] : dma.devices) {
    const auto* d = host.device(address);
    std::vector<std::pair<std::string_view, std::string>> labels{{"device", address},
                                                                 {"name", d != nullptr ? d->displayName() : address}};
    if (attributed) {
      maps.sample(labels, c.maps);
      bytes.sample(labels, c.mappedBytes);
      unmaps.sample(labels, c.unmaps);
    }
    bounces.sample(labels, c.bounces);
    faults.sample(labels, c.faults);
  }
  maps.to(out);
  bytes.to(out);
  unmaps.to(out);
  bounces.to(out);
  faults.to(out);
  if (dma.armed.contains(core::DmaEvent::IommuMap)) {
    Family("iommud_iommu_page_maps_total", "counter",
           "IOMMU page-table maps of all devices since measuring began (iommu:map; the one map count of kernels "
           "before 6.12).")
        .sample({}, dma.host.maps)
        .to(out);
  }
  Family("iommud_dma_maps_attributed", "gauge",
         "Whether this kernel attributes DMA mappings to devices (1: it has the dma:* tracepoints, 6.12 and later).")
      .sample({}, attributed ? 1 : 0)
      .to(out);
}

}  // namespace

std::string prometheusText(const Status& status, const Counters& counters, std::optional<int64_t> updatedAt) {
  std::string out;
  const auto& mode = status.mode;
  Family("iommud_iommu_present", "gauge", "Whether the host has an IOMMU (1) or not (0).")
      .sample({}, mode.present ? 1 : 0)
      .to(out);
  Family("iommud_iommu_info", "gauge",
         "The IOMMU's vendor and the default domain type of trusted devices (mode); always 1.")
      .sample({{"vendor", std::string(core::toString(mode.vendor))}, {"mode", mode.modeName()}}, 1)
      .to(out);
  auto exposed = exposuresOf(status);
  Family("iommud_protection_level", "gauge",
         "The host's protection level, 0 to 3: every device translated (1), hostile devices contained (2), no "
         "window after unmap and pre-boot protection (3); criteria in docs/score.md.")
      .sample({}, static_cast<uint64_t>(core::score(status.host, exposed, core::protections(status.host, mode)).level))
      .to(out);
  Family("iommud_devices_all_memory", "gauge", "The devices (not bridges) whose DMA can reach all memory.")
      .sample({}, core::reachAllMemory(status.host, exposed).size())
      .to(out);
  Family cachingMode("iommud_iommu_unit_caching_mode", "gauge",
                     "Whether an Intel VT-d unit has Caching Mode (an emulated IOMMU: every map is a VM exit; "
                     "forces strict invalidation).");
  Family rwbf("iommud_iommu_unit_rwbf", "gauge",
              "Whether an Intel VT-d unit needs its write buffer flushed (RWBF) on every mapping change.");
  Family npCache("iommud_iommu_unit_np_cache", "gauge",
                 "Whether an AMD-Vi unit caches non-present entries (NpCache: an emulated IOMMU; forces strict "
                 "invalidation).");
  for (const auto& u : status.host.units) {
    if (u.intel) {
      cachingMode.sample({{"unit", u.name}}, u.intel->cachingMode() ? 1 : 0);
      rwbf.sample({{"unit", u.name}}, u.intel->rwbf() ? 1 : 0);
    }
    if (u.amd) npCache.sample({{"unit", u.name}}, u.amd->npCache() ? 1 : 0);
  }
  cachingMode.to(out);
  rwbf.to(out);
  npCache.to(out);
  // Counts, not one series per group or finding: a group's number means nothing across hosts, and
  // one series per instance would make a host's series grow with its devices (docs/metrics.md,
  // "How many series").
  std::map<std::string, std::pair<uint64_t, uint64_t>> byType;  // type -> groups, devices
  for (const auto& g : status.host.groups) {
    auto& [groups, devices] = byType[g.type ? std::string(core::toString(*g.type)) : "unknown"];
    ++groups;
    devices += g.devices.size();
  }
  Family groups("iommud_groups", "gauge",
                "IOMMU groups by their default domain type as the kernel reads it (DMA, DMA-FQ, identity, "
                "blocked, unmanaged, unknown).");
  Family grouped("iommud_grouped_devices", "gauge",
                 "Devices in IOMMU groups, by the group's default domain type (bridges included).");
  for (const auto& [type, count] : byType) {
    groups.sample({{"type", type}}, count.first);
    grouped.sample({{"type", type}}, count.second);
  }
  groups.to(out);
  grouped.to(out);
  std::map<std::pair<std::string, core::Severity>, uint64_t> byFinding;
  for (const auto& f : status.findings) ++byFinding[{f.id, f.severity}];
  Family findings("iommud_findings", "gauge",
                  "Known problems present on this host, by id and severity (info, warning, error): how many times "
                  "each is found (once per group or device it touches).");
  for (const auto& [key, count] : byFinding) {
    findings.sample({{"id", key.first}, {"severity", std::string(core::toString(key.second))}}, count);
  }
  findings.to(out);
  Family("iommud_changes_total", "counter",
         "Changes the policies asked for since iommud started, by result: done, advised (advise mode), refused "
         "(unsafe or impossible), failed.")
      .sample({{"result", "done"}}, counters.done)
      .sample({{"result", "advised"}}, counters.advised)
      .sample({{"result", "refused"}}, counters.refused)
      .sample({{"result", "failed"}}, counters.failed)
      .to(out);
  Family("iommud_reverts_total", "counter",
         "Values iommud restored (revert, revert-on-stop) since it started, by result: done, failed.")
      .sample({{"result", "done"}}, counters.reverted)
      .sample({{"result", "failed"}}, counters.revertFailed)
      .to(out);
  Family("iommud_drift_total", "counter",
         "Values a revert left alone since iommud started because someone else had changed them since.")
      .sample({}, counters.drift)
      .to(out);
  if (counters.dma) dmaFamilies(*counters.dma, status.host, out);
  if (updatedAt) {
    Family(kTimestamp, "gauge", "When iommud's view of the host last changed, in seconds since the epoch.")
        .sample({}, static_cast<uint64_t>(*updatedAt))
        .to(out);
  }
  return out;
}

bool sameMetrics(std::string_view a, std::string_view b) {
  auto body = [](std::string_view t) {
    auto at = t.find("# HELP " + std::string(kTimestamp) + ' ');
    return at == std::string_view::npos ? t : t.substr(0, at);
  };
  return body(a) == body(b);
}

std::string nfdFeatures(const Status& status) {
  // Explicitly namespaced: NFD prefixes bare names with feature.node.kubernetes.io/ only for now
  // (its DisableAutoPrefix gate), and that namespace needs no -extra-label-ns on nfd-master.
  const std::string ns = "feature.node.kubernetes.io/iommud-";
  std::string out =
      "# iommud's view of this host's IOMMU, for node-feature-discovery's local source (iommud docs/metrics.md)\n";
  out += ns + "iommu-vendor=" + std::string(core::toString(status.mode.vendor)) + '\n';
  out += ns + "iommu-mode=" + status.mode.modeName() + '\n';
  out += ns + "protection-level=" + std::to_string(scoreOf(status).level) + '\n';
  bool warning = false;
  for (const auto& f : status.findings) warning = warning || f.severity != core::Severity::Info;
  out += ns + "findings-warning=" + (warning ? "true" : "false") + '\n';
  // Whether every device of a kind is in a group of type identity; no label without such devices.
  auto identity = [&](core::DeviceKind kind, std::string_view name) {
    bool any = false;
    bool all = true;
    for (const auto& d : status.host.devices) {
      if (d.kind() != kind) continue;
      any = true;
      const auto* g = d.group ? status.host.group(*d.group) : nullptr;
      all = all && g != nullptr && g->type == core::DomainType::Identity;
    }
    if (any) out += ns + std::string(name) + "-identity=" + (all ? "true" : "false") + '\n';
  };
  identity(core::DeviceKind::Nvme, "nvme");
  identity(core::DeviceKind::Nic, "nic");
  return out;
}

}  // namespace iommud::app
