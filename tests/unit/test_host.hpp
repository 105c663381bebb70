#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "adapters/sysfs/host_reader.hpp"
#include "app/host/status.hpp"
#include "config/policy_loader.hpp"
#include "support/fake_host.hpp"

namespace iommud::testing {

/// The rules of one policy text ("test.toml"); each diagnostic fails the test.
inline core::PolicySet rules(const std::string& toml) {
  std::vector<config::ParsedFile> files;
  files.push_back(config::parsePolicyText(toml, "test.toml"));
  for (const auto& d : files.front().diagnostics) ADD_FAILURE() << d.str();
  return config::combine({}, std::move(files)).policies;
}

/// Policies several tests plan and apply: identity, or DMA-FQ, for every NVMe drive (identity needs
/// the drivers unbound: it acts at hotplug only).
inline constexpr const char* kNvmeIdentity = R"(
[[rule]]
name = "nvme-identity"
description = "identity for NVMe"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
)";

/// Identity for every NVMe drive without accepting its trade-off: refused, whatever the host.
inline constexpr const char* kNvmeIdentityNotAccepted = R"(
[[rule]]
name = "nvme-identity"
description = "identity without accepting it"
domain = "identity"
[rule.match]
kind = "nvme"
)";

inline constexpr const char* kNvmeLazy = R"(
[[rule]]
name = "nvme-lazy"
description = "DMA-FQ for NVMe"
domain = "DMA-FQ"
accept = ["lazy-invalidation"]
[rule.match]
kind = "nvme"
)";

/// The Atlantic NIC's interrupt moderation: a runtime parameter and one that needs a reload (a
/// modprobe.d file).
inline constexpr const char* kAtlanticItr = R"(
[[rule]]
name = "itr"
description = "interrupt moderation"
[rule.match]
driver = "atlantic"
[[rule.param]]
name = "aq_itr"
value = 0
[[rule.param]]
name = "aq_itr_rx"
value = 64
at = "load"
)";

/// Reads a synthetic host as iommuctl does and derives mode and findings.
inline app::Status statusOf(const FakeHost& h) {
  auto r = adapters::sysfs::readHost(adapters::sysfs::Root(h.rootString()));
  if (!r) throw std::runtime_error(r.error().describe());
  return app::buildStatus(std::move(r).value());
}

inline const core::Finding* findingById(const app::Status& s, const std::string& id) {
  auto it = std::find_if(s.findings.begin(), s.findings.end(), [&](const core::Finding& f) { return f.id == id; });
  return it == s.findings.end() ? nullptr : &*it;
}

// A pointer into a temporary Status would dangle: keep the Status in a variable.
const core::Finding* findingById(app::Status&& s, const std::string& id) = delete;

inline bool hasFinding(const app::Status& s, const std::string& id) {
  return findingById(s, id) != nullptr;
}

inline std::vector<std::string> findingIds(const app::Status& s) {
  std::vector<std::string> ids;
  for (const auto& f : s.findings) ids.push_back(f.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

inline bool hasReasonContaining(const core::HostMode& m, core::Reason::Source source, const std::string& text) {
  return std::any_of(m.reasons.begin(), m.reasons.end(), [&](const core::Reason& r) {
    return r.source == source && r.text.find(text) != std::string::npos;
  });
}

}  // namespace iommud::testing
