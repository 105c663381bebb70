#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "app/host/change_record.hpp"
#include "core/names.hpp"

namespace iommud::app {

/// What the host shows now for the setting a record names (read by app/change/current_values).
struct Observed {
  enum class State { Value, Gone, Unreadable };
  State state = State::Unreadable;
  std::string value;  // Value: as read
  std::string why;    // Gone, Unreadable: in words ("device 0000:03:00.0 was removed")
};

/// One record judged against the host: `iommuctl verify`.
struct Verified {
  enum class State { AsRecorded, Drifted, Gone, Unchecked };
  State state = State::Unchecked;
  ChangeRecord record;
  std::string now;  // AsRecorded, Drifted: the value the host has
  std::string why;  // Gone, Unchecked: in words
};
inline constexpr core::Names<Verified::State, 4> kVerifiedStateNames{{{Verified::State::AsRecorded, "as-recorded"},
                                                                      {Verified::State::Drifted, "drifted"},
                                                                      {Verified::State::Gone, "gone"},
                                                                      {Verified::State::Unchecked, "unchecked"}}};
static_assert(core::checkNames(kVerifiedStateNames, Verified::State::Unchecked));
std::string_view toString(Verified::State s);

/// Each record with what the host shows for it (observed[i] for records[i]; a record without an
/// observation is unchecked): as iommud set it, another value, gone, or not checked. Pure.
std::vector<Verified> verifyRecords(const std::vector<ChangeRecord>& records, const std::vector<Observed>& observed);

/// verify's exit status (docs/man/iommuctl.1.scd): 3 when a value drifted or its device is gone,
/// else 4 when one could not be checked, else 0 (every record as recorded, or none).
int verifyExitStatus(const std::vector<Verified>& results);

/// A module parameter's value as the kernel prints it: booleans Y/N whatever was written.
std::string canonicalParam(std::string_view v);

}  // namespace iommud::app
