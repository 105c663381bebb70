#include "app/worker/worker_report.hpp"

#include <gtest/gtest.h>

namespace worker_report_test {

namespace app = iommud::app;
namespace bus = iommud::adapters::dbus;

app::WorkerReport everything() {
  app::WorkerReport r;
  r.devices = {{app::DeviceNews::Forget, "0000:02:00.0", "144d:a808/0000:0000 serial S1"},
               {app::DeviceNews::Tuned, "0000:02:00.0", "144d:a808/0000:0000 serial S1"},
               {app::DeviceNews::Rebound, "0000:03:00.0", ""},
               {app::DeviceNews::Reverted, "0000:04:00.0", ""},
               {app::DeviceNews::Replugged, "0000:05:00.0", "8086:1572/0000:0000 mac 00:11:22:33:44:55"}};
  r.actions = {{"2026-11-25T12:00:00Z", "done", "0000:02:00.0", "group 14 type DMA -> identity, done"}};
  r.counters.done = 3;
  r.counters.drift = 1;
  r.exports = {{"/run/prom/iommud.prom", ""}, {"/etc/nfd/iommud", "/etc/nfd/iommud: Permission denied"}};
  r.error = app::CallError{"org.iommud1.Error.NoSuchDevice", "no device nvme9 on this host"};
  r.planJson = "{\n  \"changes\": [],\n\t\"tab\": \"\\u0000\"\n}";
  bus::HostSummary h;
  h.vendor = "intel";
  h.mode = "DMA-FQ";
  h.groups = {{14, "DMA", {"0000:02:00.0", "0000:03:00.0"}}};
  h.devices = {{"0000:02:00.0", "nvme0", "nvme", 14, false}, {"0000:06:00.0", "", "", -1, true}};
  h.findings = {{"ats-untrusted", "warning", "ATS on\tan untrusted device"}};
  h.changes = {{"2026-11-25T12:00:00Z", "0000:02:00.0", "group 14", "type", "DMA", "identity", "nvme-pair"}};
  r.host = h;
  r.changed = {{"0000:02:00.0", "nvme0", true, false}, {"0000:03:00.0", "0000:03:00.0", std::nullopt, std::nullopt}};
  return r;
}

TEST(WorkerReport, EveryFieldSurvivesTheRoundTrip) {
  const auto r = everything();
  auto back = app::decodeReport(app::encodeReport(r));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->devices.at(3).news, app::DeviceNews::Reverted);
  EXPECT_EQ(back->planJson, r.planJson);
}

TEST(WorkerReport, AnEmptyReportIsNotAViewOfTheHost) {
  auto back = app::decodeReport(app::encodeReport({}));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, app::WorkerReport{});
  EXPECT_FALSE(back->host);
  EXPECT_FALSE(back->error);
  EXPECT_FALSE(back->planJson);
}

TEST(WorkerReport, AnEmptyViewOfTheHostIsOne) {
  app::WorkerReport r;
  r.host.emplace();
  auto back = app::decodeReport(app::encodeReport(r));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_TRUE(back->host);
}

TEST(WorkerReport, EveryTruncationIsAnErrorNotAPartialReport) {
  const std::string bytes = app::encodeReport(everything());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto back = app::decodeReport(std::string_view(bytes).substr(0, n));
    EXPECT_FALSE(back) << "a report cut at byte " << n << " of " << bytes.size() << " decoded";
  }
}

// A report as the wire spells it: fields by name, in any order.
constexpr const char* kMinimal =
    R"({"complete":true,"exports":[],"counters":{"drift":0,"done":1,"advised":0,"refused":0,"failed":0,)"
    R"("reverted":0,"revertFailed":0},"actions":[],"devices":[{"identity":"","address":"a","news":"tuned"}]})";

TEST(WorkerReport, FieldsAreReadByNameInAnyOrder) {
  auto back = app::decodeReport(kMinimal);
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->counters.done, 1U);
  ASSERT_EQ(back->devices.size(), 1U);
  EXPECT_EQ(back->devices[0].news, app::DeviceNews::Tuned);
  EXPECT_EQ(back->devices[0].address, "a");
}

TEST(WorkerReport, GarbageWrongTypesMissingFieldsAndUnknownNamesAreErrors) {
  const std::string minimal = kMinimal;
  auto with = [&](const std::string& from, const std::string& to) {
    auto at = minimal.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return std::string(minimal).replace(at, from.size(), to);
  };
  for (const std::string& bytes :
       {std::string(),
        std::string("\x01\x02\xff"),
        std::string("[]"),
        std::string("null"),
        std::string("42"),
        std::string("{}"),
        with(R"("news":"tuned")", R"("news":"T")"),  // the old wire's letter
        with(R"("news":"tuned")", R"("news":"Tuned")"),
        with(R"("news":"tuned")", R"("news":7)"),
        with(R"("news":"tuned")", R"("newz":"tuned")"),
        with(R"("done":1)", R"("done":-1)"),
        with(R"("done":1,)", ""),
        with(R"("done":1)", R"("done":"1")"),
        with(R"("counters":{)", R"("counters":[{)"),
        with(R"("devices":[)", R"("devices":{"x":)"),
        with(R"("complete":true,)", ""),
        with(R"("actions":[])", R"("actions":[{"time":"t","result":"done","device":"a"}])"),
        with(R"("exports":[])", R"("exports":[],"host":{"vendor":1})"),
        with(R"("exports":[])", R"("exports":[],"changed":[{"device":"a","name":"b","translatedBefore":"yes",)"
                                R"("translatedAfter":null}])"),
        with(R"("exports":[])", R"("exports":[],"changed":{})"),
        std::string("T\t0000:02:00.0\tidentity\n")}) {
    auto back = app::decodeReport(bytes);
    EXPECT_FALSE(back) << "decoded: " << bytes;
    if (!back) {
      EXPECT_FALSE(back.error().describe().empty());
    }
  }
}

TEST(WorkerReport, AReportCutShortSaysSo) {
  app::WorkerReport r;
  r.complete = false;
  auto back = app::decodeReport(app::encodeReport(r));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_FALSE(back->complete);
  EXPECT_TRUE(app::decodeReport(app::encodeReport(app::WorkerReport{}))->complete);
}

TEST(WorkerRequest, EveryFieldSurvivesTheRoundTrip) {
  app::WorkerRequest r;
  r.kind = app::WorkerRequest::Kind::Call;
  r.batch = {{"0000:02:00.0"}, {"0000:03:00.0", "0000:04:00.0"}};
  r.call = {app::WorkerCall::Kind::Revert, true, "nvme0"};
  r.wantsView = true;
  r.busView = true;
  r.counters.refused = 2;
  r.counters.revertFailed = 5;
  r.departed = {{"144d:a808/0000:0000 serial S1", "0000:02:00.0"}, {"8086:1572/0000:0000 mac \xff", "0000:05:00.0"}};
  auto back = app::decodeRequest(app::encodeRequest(r));
  ASSERT_TRUE(back) << back.error().describe();
  r.departed = {{"144d:a808/0000:0000 serial S1", "0000:02:00.0"},
                {"8086:1572/0000:0000 mac \xef\xbf\xbd", "0000:05:00.0"}};
  EXPECT_EQ(*back, r);
  for (auto kind :
       {app::WorkerRequest::Kind::Batch, app::WorkerRequest::Kind::View, app::WorkerRequest::Kind::Recover}) {
    app::WorkerRequest k;
    k.kind = kind;
    EXPECT_EQ(app::decodeRequest(app::encodeRequest(k))->kind, kind);
  }
}

TEST(WorkerRequest, TruncationsGarbageAndUnknownKindsAreErrors) {
  app::WorkerRequest r;
  r.batch.hot = {"0000:02:00.0"};
  const auto bytes = app::encodeRequest(r);
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(app::decodeRequest(bytes.substr(0, n))) << n;
  auto bad = bytes;
  bad.replace(bad.find("\"kind\":\"batch\""), 14, "\"kind\":\"batcj\"");
  EXPECT_FALSE(app::decodeRequest(bad));
  auto badCall = bytes;
  badCall.replace(badCall.find("\"kind\":\"apply\""), 14, "\"kind\":\"appl\"");
  EXPECT_FALSE(app::decodeRequest(badCall));
  EXPECT_FALSE(app::decodeRequest("[]"));
  EXPECT_FALSE(app::decodeRequest("{\"kind\":0}"));
}

}  // namespace worker_report_test
