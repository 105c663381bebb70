#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iommud::core {

/// The number of single-character insertions, deletions, substitutions and swaps of two adjacent
/// characters that turn `a` into `b` (optimal string alignment distance): `stauts` is 1 from `status`.
std::size_t editDistance(std::string_view a, std::string_view b);

/// The candidate `word` is most likely a misspelling of: the nearest by editDistance when it is near
/// enough for its length (none up to 2 characters, 1 for 3, then a third of them, at least 2), or the one
/// candidate it begins (of 3 characters or more); the first of equals. nullopt when none is.
std::optional<std::string> nearestWord(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace iommud::core
