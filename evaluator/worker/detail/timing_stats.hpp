// The timing stage's sample statistics: the median, the interquartile spread and the stopping rule's
// confidence interval of the median.
#pragma once

#include <vector>

namespace ptxbench::worker::detail {

double median_of(std::vector<double> v);
/// (p75 - p25) / median; 1 with fewer than 4 samples.
double rel_spread(std::vector<double> v);
/// Relative half-width of the ~95% confidence interval of the median
/// (1.57·IQR/√n, the box-plot notch): the adaptive stopping rule compares this
/// with TimingPolicy::target_rel_spread, so that the reported median, not each
/// sample, is known to that precision. `dependent`: n is the effective count
/// n·(1−ρ)/(1+ρ), ρ = lag1_autocorrelation(v), for samples in sampling order.
double median_ci_rel(const std::vector<double> &v, bool dependent = false);
/// Lag-1 autocorrelation of a series, clamped to [0, 0.9]; 0 with fewer than 8 values or none spread.
double lag1_autocorrelation(const std::vector<double> &v);
/// The per-iteration ratios library[i] / candidate[i] of the first min(size) pairs (pairs whose
/// candidate time is not positive are left out).
std::vector<double> paired_ratios(const std::vector<double> &candidate, const std::vector<double> &library);

}  // namespace ptxbench::worker::detail
