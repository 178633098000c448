// One set of figures from the per-kernel ranges of one piece of work (a library call may launch several
// kernels). Pure, so it is tested without a GPU.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ptxbench::worker::detail {

/// Combines the metrics of kernel ranges run back to back: `.sum` figures (durations, bytes, counts) add up,
/// `.max` takes the largest, `.min` the smallest, and every other figure (shares of a peak, rates, hit rates,
/// per-second figures) is the mean weighted by each range's `gpu__time_duration.sum` (equal weights where a
/// range lacks it). For one range the figures come back unchanged. The weighted mean is exact for
/// `*_elapsed` shares and rates of kernels that do not overlap, and an approximation for ratios of other
/// counts (e.g. a hit rate), which would need the counts themselves.
std::map<std::string, double> combine_kernel_ranges(const std::vector<std::map<std::string, double>> &ranges);

}  // namespace ptxbench::worker::detail
