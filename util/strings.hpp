// Small string helpers shared by the modules.
#pragma once

#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace ptxbench::util {

/// `s` without leading and trailing white space.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// A fraction (1.0 = all) as a percentage for people and models: "100%", "2.5%", "0%",
/// "under 0.01%" (a tiny share must not read as zero).
inline std::string percent_text(double fraction) {
  const double percent = fraction * 100.0;
  if (percent > 0 && percent < 0.01) return "under 0.01%";
  char buf[64];
  std::snprintf(buf, sizeof buf, percent >= 10 ? "%.0f%%" : "%.2g%%", percent);
  return buf;
}

/// A count for people: integers as integers ("58720256"), others with 4 significant digits.
inline std::string number_text(double v) {
  char buf[64];
  if (v == static_cast<double>(static_cast<long long>(v)) && v < 1e18 && v > -1e18)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

/// `items` with `separator` between them.
inline std::string join(const std::vector<std::string> &items, std::string_view separator) {
  std::string out;
  for (const auto &s : items) {
    if (!out.empty()) out += separator;
    out += s;
  }
  return out;
}

/// The first complete line (ended by '\n') of `text` that starts with `prefix`, without its '\n'; ""
/// when there is none (a line still being written does not count).
inline std::string_view line_starting_with(std::string_view text, std::string_view prefix) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) break;
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with(prefix)) return line;
    at = end + 1;
  }
  return {};
}

}  // namespace ptxbench::util
