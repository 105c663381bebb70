#pragma once

#include <string>
#include <vector>

#include "app/host/verify.hpp"
#include "app/report/text_style.hpp"

namespace iommud::app {

/// `iommuctl verify`: each record with its verdict, drift first, then one line that sums up.
std::string verifyText(const std::vector<Verified>& results, const Style& style);

/// `iommuctl verify --json` (docs/schema/verify.schema.json).
std::string verifyJson(const std::vector<Verified>& results);

}  // namespace iommud::app
