#include "evaluator/worker/detail/range_combine.hpp"

#include <algorithm>
#include <string_view>

namespace ptxbench::worker::detail {
namespace {

constexpr std::string_view kDuration = "gpu__time_duration.sum";

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

std::map<std::string, double> combine_kernel_ranges(
    const std::vector<std::map<std::string, double>> &ranges) {
  if (ranges.size() == 1) return ranges.front();
  std::map<std::string, double> out;
  std::map<std::string, double> weight_of;  // metric -> summed weight of the ranges that have it
  for (const auto &range : ranges) {
    const auto d = range.find(std::string(kDuration));
    const double weight = d != range.end() && d->second > 0 ? d->second : 1.0;
    for (const auto &[name, value] : range) {
      const bool first = !out.count(name);
      double &acc = out[name];
      if (ends_with(name, ".sum")) {
        acc += value;
      } else if (ends_with(name, ".max")) {
        acc = first ? value : std::max(acc, value);
      } else if (ends_with(name, ".min")) {
        acc = first ? value : std::min(acc, value);
      } else {
        acc += value * weight;
        weight_of[name] += weight;
      }
    }
  }
  for (const auto &[name, weight] : weight_of)
    if (weight > 0) out[name] /= weight;
  return out;
}

}  // namespace ptxbench::worker::detail
