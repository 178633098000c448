// One name table per closed enum, read in both directions: to_string and from_string cannot disagree,
// and the names a parser accepts are the names a writer emits.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ptxbench::util {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

/// The name of `value` in `table`; "" when the table lacks it (a table missing an enumerator is a bug
/// its round-trip test catches).
template <class E, std::size_t N>
constexpr std::string_view enum_to_string(const EnumName<E> (&table)[N], E value) {
  for (const auto &entry : table)
    if (entry.value == value) return entry.name;
  return {};
}

/// The enumerator named `name` (exact match); nullopt when no entry has that name.
template <class E, std::size_t N>
constexpr std::optional<E> enum_from_string(const EnumName<E> (&table)[N], std::string_view name) {
  for (const auto &entry : table)
    if (entry.name == name) return entry.value;
  return std::nullopt;
}

/// Every name, in table order, joined by `separator` (for "known: ..." messages).
template <class E, std::size_t N>
std::string enum_names(const EnumName<E> (&table)[N], std::string_view separator = ", ") {
  std::string out;
  for (const auto &entry : table) {
    if (!out.empty()) out += separator;
    out += entry.name;
  }
  return out;
}

}  // namespace ptxbench::util
