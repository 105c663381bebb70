#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/findings.hpp"

// The finding of a state file iommud could not understand whole (its change records): what was
// not understood, where the file is kept, and what to do (app::readRecordsView finds them).

namespace iommud::core {

inline constexpr std::string_view kStateFileDamagedId = "state-file-damaged";

/// A records file not understood whole, or one kept aside because it was not.
struct DamagedStateFile {
  std::string file;               // the file as iommud reads it ("/run/iommud/changes.json")
  std::vector<std::string> what;  // what was not understood, in words
  std::string keptAs;             // where it is kept, once moved aside; "" while it is still in place
  bool salvaged = false;          // its intact records were carried over into the file in place
};

/// One error finding per damaged file: what was not understood, that iommud makes no change that
/// weakens protection while it stands, and the commands that deal with it.
std::vector<Finding> damageFindings(const std::vector<DamagedStateFile>& files);

/// "changes.json: entry 3: ...; entry 5: ..." in one line, for a journal entry or STATUS=.
std::string describeDamage(const std::vector<DamagedStateFile>& files);

}  // namespace iommud::core
