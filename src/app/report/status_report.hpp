#pragma once

#include <string>
#include <vector>

#include "app/host/status.hpp"
#include "app/report/json_writer.hpp"
#include "app/report/text_style.hpp"
#include "core/protections.hpp"

namespace iommud::app {

/// The reasons as `--json` writes them: [{"source", "text"}].
void writeReasonsJson(JsonWriter& w, const std::vector<core::Reason>& reasons);

/// Version of the `--json` schema (docs/status-json.md, docs/schema/status.schema.json); bumped on incompatible
/// changes.
inline constexpr int kStatusSchemaVersion = 1;

/// The `--json` document (docs/status-json.md), newline-terminated.
std::string statusJson(const Status& status);
/// The same document, handed to `sink` in pieces as it is written (what iommuctl prints: a large
/// host's document is never whole in memory).
void statusJson(const Status& status, const JsonWriter::Sink& sink);

/// One device or finding as `status --json` writes it (reused by `explain --json`).
void writeDeviceJson(JsonWriter& w, const core::PciDevice& d);
void writeFindingJson(JsonWriter& w, const core::Finding& f);
/// One IOMMU group as `status --json` writes it under "groups" (its notes from the mode).
void writeGroupJson(JsonWriter& w, const core::Group& g, const core::HostMode& m);
/// One of iommud's change records as `status --json` writes it under "changes".
void writeChangeJson(JsonWriter& w, const ChangeRecord& c);
/// A change record for people: "group 5 type: DMA -> identity", "/etc/modprobe.d/x.conf written".
std::string changeText(const ChangeRecord& c);

/// The human summary, the verdict first. `color` adds ANSI colours (only for a terminal); no line
/// is wider than `width` but for a word that is (fitLines).
std::string statusText(const Status& status, bool color, size_t width = kTextWidth);
/// The verdict alone (`status --brief`, bare `iommuctl`): the protection level, how many devices can
/// reach all memory and the worst of them, the findings by severity with the first remedy of
/// each, and whether iommud runs, since when and what it last changed.
std::string statusBrief(const Status& status, bool color, size_t width = kTextWidth);

}  // namespace iommud::app
