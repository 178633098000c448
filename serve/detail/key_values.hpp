// "a=1&b=2" (a query) or "a=1,b=2" (--reward) -> items in order; empty items skipped; no percent-decoding.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptxbench::serve::detail {

struct KeyValue {
  std::string key;
  std::optional<std::string> value;  ///< nullopt: the item had no '='
};

inline std::vector<KeyValue> key_values(std::string_view text, char separator) {
  std::vector<KeyValue> out;
  while (!text.empty()) {
    const auto end = text.find(separator);
    const std::string_view item = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    out.push_back({std::string(item.substr(0, eq)), eq == std::string_view::npos
                                                        ? std::nullopt
                                                        : std::optional(std::string(item.substr(eq + 1)))});
  }
  return out;
}

}  // namespace ptxbench::serve::detail
