// libFuzzer target: the readers of iommud's own state files (src/adapters/state), what a crash, a
// full disk or a stray editor may leave in /run/iommud and /var/lib/iommud. The input is read as a
// records file and as a transaction journal. Nothing may crash or throw; what is read must be
// written again as read (a records file: every record understood goes back out and reads back
// whole, to the same text; a journal: its header, steps and end, formatted and read again, are the
// same); a journal's torn last line is taken as never written; and a record holding the input's
// bytes as text is either refused (not UTF-8) or read back exactly.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "adapters/state/change_records.hpp"
#include "adapters/state/journal.hpp"

using namespace iommud::adapters::state;  // NOLINT(google-build-using-namespace): a fuzz target

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

void checkRecords(std::string_view text) {
  const RecordsFile read = parseRecordsFile(text);
  if (read.records.empty()) return;
  auto again = recordsText(read.records);
  if (!again) fail("records read from JSON do not write back");
  const RecordsFile reread = parseRecordsFile(*again);
  if (!reread.whole()) fail("records written back do not read whole");
  if (reread.records.size() != read.records.size()) fail("records written back read as another number");
  auto third = recordsText(reread.records);
  if (!third || *third != *again) fail("records written back read as other records");
}

std::string journalText(const JournalRecord& r) {
  std::string out = formatJournalHeader(r.change);
  for (const auto& step : r.steps) out += "step " + step + "\n";
  if (r.end) out += "end " + *r.end + "\n";
  return out;
}

void checkJournal(std::string_view text) {
  auto read = parseJournal(text);
  if (!read) return;
  // A torn append: a last line without its newline is as if never written.
  if (text.empty() || text.back() == '\n') {
    auto torn = parseJournal(std::string(text) + "step unbind 0000:0");
    if (!torn || journalText(*torn) != journalText(*read) || torn->damage != read->damage)
      fail("a torn last line changed what the journal says");
  }
  // Damage is reported, not written again; a journal with no whole line was never begun.
  if (!read->damage.empty() || text.find('\n') == std::string_view::npos) return;
  const std::string once = journalText(*read);
  auto reread = parseJournal(once);
  if (!reread || !reread->damage.empty()) fail("a journal formatted again does not read whole");
  if (journalText(*reread) != once) fail("a journal formatted again reads as another");
}

void checkBytesAsText(std::string_view bytes) {
  ChangeRecord r;
  r.kind = iommud::core::ChangeKind::ModprobeConf;
  r.object = "/etc/modprobe.d/iommud-fuzz.conf";
  r.key = "(file)";
  r.original = std::string(bytes);
  auto text = recordsText({r});
  if (!text) return;  // not UTF-8: refused, never changed
  const RecordsFile read = parseRecordsFile(*text);
  if (!read.whole() || read.records.size() != 1 || read.records[0].original != r.original)
    fail("a record's text did not read back exactly");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  checkRecords(text);
  checkJournal(text);
  checkBytesAsText(text);
  return 0;
}
