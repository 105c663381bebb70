#include "app/report/device_report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "app/report/status_report.hpp"
#include "support/scenarios.hpp"
#include "unit/test_host.hpp"

namespace device_report_test {

using namespace iommud;
using namespace iommud::testing;

// One rule for NVMe drives, one for NICs: only the first matches an NVMe drive.
core::PolicySet nvmeAndNicRules() {
  return rules(std::string(kNvmeIdentity) + R"(
[[rule]]
name = "nic-strict"
description = "strict"
domain = "DMA"
[rule.match]
kind = "nic"
)");
}

// The view of the device named `name` and its text, as `status DEVICE` builds them.
struct Shown {
  app::Status status;
  core::PolicySet policies = nvmeAndNicRules();
  std::vector<core::DeviceExposure> exposures;
  std::vector<core::RuleEvaluation> evaluations;
  app::DeviceView view;

  Shown(app::Status s, const std::string& name) : status(std::move(s)) {
    const auto* d = app::findDevice(status.host, name);
    if (d == nullptr) throw std::runtime_error("no device " + name);
    exposures = app::exposuresOf(status);
    evaluations = core::evaluateRules({status.host, status.mode, status.findings}, policies, *d);
    view = app::deviceView(status, *d, exposures, evaluations);
  }
  [[nodiscard]] std::string text(size_t width = app::kTextWidth) const {
    return app::deviceText(status, view, true, false, width);
  }
};

app::ChangeRecord domainChange(int group, const std::string& device) {
  app::ChangeRecord c;
  c.kind = core::ChangeKind::Domain;
  c.group = group;
  c.device = device;
  c.object = "group " + std::to_string(group);
  c.key = "type";
  c.original = "DMA-FQ";
  c.written = "DMA";
  c.rule = "strict";
  c.ruleWhere = "/etc/iommud/policies.d/strict.toml:1:1";
  c.time = "2026-11-27T10:00:00Z";
  return c;
}

TEST(DeviceView, GathersTheGroupTheMatchingRulesAndTheChangesOfTheDevice) {
  auto s = statusOf(*twoNvmeOneGroup());
  s.changes.push_back(domainChange(20, "0000:03:00.0"));
  s.changes.push_back(domainChange(0, "0000:00:00.0"));  // another group's: not this device's
  Shown shown(std::move(s), "nvme1");
  ASSERT_NE(shown.view.group, nullptr);
  EXPECT_EQ(shown.view.group->id, 20);
  EXPECT_EQ(shown.view.device->address, "0000:04:00.0");
  ASSERT_EQ(shown.view.rules.size(), 1U);
  EXPECT_EQ(shown.view.rules.front()->rule->name, "nvme-identity");
  ASSERT_EQ(shown.view.changes.size(), 1U);  // its group's change, made for its neighbour
  EXPECT_EQ(shown.view.changes.front()->object, "group 20");
  ASSERT_NE(shown.view.exposure, nullptr);
  EXPECT_EQ(shown.view.exposure->level, core::Exposure::MappedWindow);
}

TEST(DeviceView, TextNamesTheGroupsOtherMembersTheExposureAndWhy) {
  Shown shown(statusOf(*twoNvmeOneGroup()), "0000:03:00.0");
  auto text = shown.text();
  EXPECT_NE(text.find("Device   0000:03:00.0 nvme0 (144d:a80a, class 010802, nvme)"), std::string::npos) << text;
  EXPECT_NE(text.find("Driver   nvme, not in use"), std::string::npos) << text;
  EXPECT_NE(text.find("Trust    trusted: a fixed device"), std::string::npos) << text;
  EXPECT_NE(text.find("Group    20 (DMA-FQ), shared with 5 other devices"), std::string::npos) << text;
  EXPECT_NE(text.find("         0000:04:00.0 nvme1"), std::string::npos) << text;
  EXPECT_NE(text.find("Exposure mapped buffers, with a window after unmap"), std::string::npos) << text;
  EXPECT_NE(text.find("group: group 20 reads DMA-FQ"), std::string::npos) << text;
  EXPECT_NE(text.find("  nvme-identity (test.toml:2:1), mode apply"), std::string::npos) << text;
  EXPECT_NE(text.find("Changed by iommud: nothing"), std::string::npos) << text;
  EXPECT_EQ(text.find("nic-strict"), std::string::npos) << text;
}

TEST(DeviceView, TextFitsANarrowTerminal) {
  auto s = statusOf(*thunderboltNic());
  Shown shown(std::move(s), "enp5s0");
  for (size_t width : {40U, 60U, 100U}) {
    auto text = shown.text(width);
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      auto row = text.substr(start, end - start);
      // A word wider than the terminal (a path) stays whole: only rows with a space to break at count.
      if (row.find(' ', row.find_first_not_of(' ')) != std::string::npos && row.find('/') == std::string::npos) {
        EXPECT_LE(row.size(), width) << row;
      }
      start = end + 1;
    }
    EXPECT_NE(text.find("Trust    untrusted: behind a"), std::string::npos) << text;
  }
}

TEST(DeviceView, JsonHasTheDeviceItsGroupExposureFindingsRulesAndChanges) {
  auto s = statusOf(*twoNvmeOneGroup());
  s.changes.push_back(domainChange(20, "0000:03:00.0"));
  Shown shown(std::move(s), "nvme0n1");
  auto j = nlohmann::json::parse(app::deviceJson(shown.status, shown.view, true));
  EXPECT_EQ(j["schema_version"], app::kStatusSchemaVersion);
  EXPECT_EQ(j["device"]["address"], "0000:03:00.0");
  EXPECT_EQ(j["group"]["id"], 20);
  EXPECT_EQ(j["group"]["shared"], true);
  EXPECT_EQ(j["exposure"]["level"], "mapped-window");
  EXPECT_EQ(j["rules"].size(), 1U);
  EXPECT_EQ(j["rules"][0]["name"], "nvme-identity");
  EXPECT_EQ(j["changes"].size(), 1U);
  EXPECT_EQ(j["changes"][0]["to"], "DMA");
  EXPECT_TRUE(j["findings"].is_array());
  // Policies that could not be read: rules unknown, not none.
  EXPECT_TRUE(nlohmann::json::parse(app::deviceJson(shown.status, shown.view, false))["rules"].is_null());
}

TEST(DeviceView, NearestNamesAreThoseOfThisHostCloseToAnUnknownOne) {
  auto s = statusOf(*twoNvmeOneGroup());
  EXPECT_EQ(app::nearestDeviceNames(s.host, "nvme9"), (std::vector<std::string>{"nvme0", "nvme1"}));
  EXPECT_EQ(app::nearestDeviceNames(s.host, "03:00.1"), (std::vector<std::string>{"0000:03:00.0"}));
  EXPECT_TRUE(app::nearestDeviceNames(s.host, "enp0s31f6").empty());
}

}  // namespace device_report_test
