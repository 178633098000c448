#include "evaluator/worker/detail/timing_stats.hpp"

#include <algorithm>
#include <cmath>

namespace ptxbench::worker::detail {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double rel_spread(std::vector<double> v) {
  if (v.size() < 4) return 1;
  std::sort(v.begin(), v.end());
  const double p25 = v[v.size() / 4], p75 = v[(3 * v.size()) / 4];
  const double med = v[v.size() / 2];
  return med > 0 ? (p75 - p25) / med : 1;
}

/// Relative half-width of the ~95% confidence interval of the median
/// (1.57·IQR/√n, the box-plot notch): the adaptive stopping rule compares this
/// with TimingPolicy::target_rel_spread, so that the reported median, not each
/// sample, is known to that precision.
double median_ci_rel(const std::vector<double> &v, bool dependent) {
  if (v.size() < 4) return 1;
  double n = static_cast<double>(v.size());
  if (dependent) {
    const double rho = lag1_autocorrelation(v);
    n *= (1 - rho) / (1 + rho);
  }
  return 1.57 * rel_spread(v) / std::sqrt(std::max(n, 1.0));
}

double lag1_autocorrelation(const std::vector<double> &v) {
  if (v.size() < 8) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0, cov = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    var += (v[i] - mean) * (v[i] - mean);
    if (i + 1 < v.size()) cov += (v[i] - mean) * (v[i + 1] - mean);
  }
  if (var <= 0) return 0;
  return std::clamp(cov / var, 0.0, 0.9);
}

std::vector<double> paired_ratios(const std::vector<double> &candidate, const std::vector<double> &library) {
  std::vector<double> out;
  const std::size_t n = std::min(candidate.size(), library.size());
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (candidate[i] > 0) out.push_back(library[i] / candidate[i]);
  return out;
}

}  // namespace ptxbench::worker::detail
