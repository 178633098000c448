// Small string helpers shared by the modules.
#pragma once

#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>

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

}  // namespace ptxbench::util
