#include "config/line_index.hpp"

#include <algorithm>

namespace iommud::config::detail {

namespace {
thread_local size_t workDone = 0;
}  // namespace

LineIndex::LineIndex(std::string_view text) : text_(text) {
  starts_.push_back(0);
  for (size_t i = text.find('\n'); i != std::string_view::npos; i = text.find('\n', i + 1)) starts_.push_back(i + 1);
  workDone += text.size();
}

size_t LineIndex::lineAt(size_t offset) const {
  ++workDone;
  offset = std::min(offset, text_.size());
  return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin()) - 1;
}

LineIndex::Position LineIndex::at(size_t offset) const {
  size_t line = lineAt(offset);
  offset = std::min(offset, text_.size());
  return Position{static_cast<int>(line) + 1, static_cast<int>(offset - starts_[line]) + 1};
}

std::string_view LineIndex::lineOf(size_t offset) const {
  size_t line = lineAt(offset);
  size_t end = line + 1 < starts_.size() ? starts_[line + 1] - 1 : text_.size();
  workDone += end - starts_[line];  // the caller searches it
  return text_.substr(starts_[line], end - starts_[line]);
}

size_t LineIndex::work() {
  return workDone;
}

}  // namespace iommud::config::detail
