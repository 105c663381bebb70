#include "app/host/verify.hpp"

#include <algorithm>

#include "core/text.hpp"

namespace iommud::app {

namespace {

using core::ChangeKind;

// The value as the kernel prints it: a boolean parameter written as 1 reads Y.
std::string comparable(ChangeKind kind, std::string_view v) {
  if (kind == ChangeKind::ModprobeConf) return std::string(v);  // the whole file, byte for byte
  return kind == ChangeKind::ModuleParam ? canonicalParam(v) : std::string(core::trim(v));
}

}  // namespace

std::string_view toString(Verified::State s) {
  return core::nameOf(kVerifiedStateNames, s);
}

std::vector<Verified> verifyRecords(const std::vector<ChangeRecord>& records, const std::vector<Observed>& observed) {
  std::vector<Verified> out;
  out.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const ChangeRecord& r = records[i];
    const Observed seen = i < observed.size() ? observed[i] : Observed{Observed::State::Unreadable, "", "not read"};
    Verified v{Verified::State::Unchecked, r, "", seen.why};
    if (seen.state == Observed::State::Gone) {
      v.state = Verified::State::Gone;
    } else if (seen.state == Observed::State::Value) {
      v.now = r.kind == ChangeKind::ModprobeConf ? seen.value : std::string(core::trim(seen.value));
      v.state = comparable(r.kind, seen.value) == comparable(r.kind, r.written) ? Verified::State::AsRecorded
                                                                                : Verified::State::Drifted;
    }
    out.push_back(std::move(v));
  }
  return out;
}

int verifyExitStatus(const std::vector<Verified>& results) {
  auto any = [&](auto pred) { return std::any_of(results.begin(), results.end(), pred); };
  if (any([](const Verified& v) { return v.state == Verified::State::Drifted || v.state == Verified::State::Gone; }))
    return 3;
  if (any([](const Verified& v) { return v.state == Verified::State::Unchecked; })) return 4;
  return 0;
}

std::string canonicalParam(std::string_view v) {
  std::string s(core::trim(v));
  if (s == "1" || s == "y" || s == "Y" || s == "true" || s == "on") return "Y";
  if (s == "0" || s == "n" || s == "N" || s == "false" || s == "off") return "N";
  return s;
}

}  // namespace iommud::app
