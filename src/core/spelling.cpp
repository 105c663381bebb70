#include "core/spelling.hpp"

#include <algorithm>

namespace iommud::core {

std::size_t editDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the swap looks two rows back.
  std::vector<std::size_t> before(b.size() + 1);
  std::vector<std::size_t> previous(b.size() + 1);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

std::optional<std::string> nearestWord(std::string_view word, const std::vector<std::string>& candidates) {
  // Two characters are too few to tell a slip from another word: `-x` is not `-h`.
  const std::size_t allowed = word.size() <= 2 ? 0 : word.size() == 3 ? 1 : std::max<std::size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  std::size_t bestDistance = allowed + 1;
  for (const auto& c : candidates) {
    const std::size_t d = editDistance(word, c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  if (best) return best;
  if (word.size() < 3) return std::nullopt;
  std::optional<std::string> begun;
  for (const auto& c : candidates) {
    if (!c.starts_with(word)) continue;
    if (begun) return std::nullopt;  // `s` of status and snapshot: either
    begun = c;
  }
  return begun;
}

}  // namespace iommud::core
