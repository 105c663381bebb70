#pragma once

// Lines and columns of byte offsets in a TOML file's text, for the diagnostics of src/config.
// No toml11 here: the unit tests see it.

#include <cstddef>
#include <string_view>
#include <vector>

namespace iommud::config::detail {

/// Where each line of a text starts, found in one pass: a position is then a binary search, where
/// toml11's own (toml::value::location()) counts the lines from the start of the file each time,
/// which made locating every rule of a large file quadratic. Lines and columns are counted as
/// toml11 counts them: from 1, lines end at '\n', a column counts bytes.
class LineIndex {
 public:
  struct Position {
    int line = 0;
    int column = 0;
  };

  explicit LineIndex(std::string_view text);

  [[nodiscard]] Position at(size_t offset) const;
  /// The line that holds `offset`, without its '\n'.
  [[nodiscard]] std::string_view lineOf(size_t offset) const;

  /// The bytes this thread's indexes have read or handed out (lineOf) and the positions they
  /// have computed, all told:
  /// what a test watches grow with the size of the file (no clock: this machine is shared).
  static size_t work();

 private:
  [[nodiscard]] size_t lineAt(size_t offset) const;

  std::string_view text_;
  std::vector<size_t> starts_;
};

}  // namespace iommud::config::detail
