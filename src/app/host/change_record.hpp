#pragma once

#include "adapters/state/change_records.hpp"

namespace iommud::app {

/// One change iommud made and the value it found (kept by adapters/state's record store).
using ChangeRecord = adapters::state::ChangeRecord;

}  // namespace iommud::app
