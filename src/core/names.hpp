#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace iommud::core {

/// An enum's one table of names: the only place its values are spelt, read by its toString, its
/// parser, JSON, text and the worker's wire alike. A table lists every value once (checkNames
/// says so at compile time, where the table is defined).
template <class E, std::size_t N>
using Names = std::array<std::pair<E, std::string_view>, N>;

/// The name of `value`; empty when the table lacks it (checkNames rules that out).
template <class E, std::size_t N>
constexpr std::string_view nameOf(const Names<E, N>& names, E value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return {};
}

/// The value called `name`; nullopt for a name the table does not have.
template <class E, std::size_t N>
constexpr std::optional<E> valueNamed(const Names<E, N>& names, std::string_view name) {
  for (const auto& [v, n] : names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

/// True when the table lists the values 0..N-1 of an enum with N values, in order, each with a
/// distinct non-empty name: `static_assert(checkNames(kTable, Enum::Last))`.
template <class E, std::size_t N>
constexpr bool checkNames(const Names<E, N>& names, E last) {
  if (static_cast<std::size_t>(last) + 1 != N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(names[i].first) != i || names[i].second.empty()) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (names[j].second == names[i].second) return false;
    }
  }
  return true;
}

}  // namespace iommud::core
