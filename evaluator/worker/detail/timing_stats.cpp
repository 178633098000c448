#include "evaluator/worker/detail/timing_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/enum_names.hpp"

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

double student_t_975(int df) {
  // Quantiles for df = 1..30, then coarser steps; interpolation is not needed at this precision.
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return std::numeric_limits<double>::infinity();
  if (df <= 30) return kTable[df - 1];
  if (df <= 40) return 2.021;
  if (df <= 60) return 2.000;
  if (df <= 120) return 1.980;
  return 1.960;
}

RatioInterval ratio_interval_95(const std::vector<double> &ratios) {
  std::vector<double> logs;
  for (double r : ratios)
    if (r > 0) logs.push_back(std::log(r));
  if (logs.size() < 2) return {0, std::numeric_limits<double>::infinity()};
  const double n = static_cast<double>(logs.size());
  double mean = 0;
  for (double x : logs) mean += x;
  mean /= n;
  double var = 0;
  for (double x : logs) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / (n - 1));
  const double half = student_t_975(static_cast<int>(logs.size()) - 1) * sd / std::sqrt(n);
  return {std::exp(mean - half), std::exp(mean + half)};
}

namespace {
constexpr util::EnumName<SamplingStop> kSamplingStopNames[] = {
    {SamplingStop::go_on, "go_on"},
    {SamplingStop::far_from_library, "far_from_library"},
    {SamplingStop::medians, "medians"},
    {SamplingStop::ratio, "ratio"},
    {SamplingStop::max_seconds, "max_seconds"}};
}  // namespace

std::string_view to_string(SamplingStop s) {
  return util::enum_to_string(kSamplingStopNames, s);
}

SamplingStop sampling_stop(const std::vector<double> &candidate_ms, const std::vector<double> &library_ms,
                           double seconds, const protocol::TimingPolicy &tp) {
  const int n = static_cast<int>(std::min(candidate_ms.size(), library_ms.size()));
  // Far below the library the figure needs no 0.5% precision: stop once its interval says so.
  if (tp.far_from_library_speedup > 0 && n >= tp.far_min_samples &&
      ratio_interval_95(paired_ratios(candidate_ms, library_ms)).hi < tp.far_from_library_speedup)
    return SamplingStop::far_from_library;
  if (n < tp.min_samples || seconds < tp.min_seconds)
    return seconds >= tp.max_seconds ? SamplingStop::max_seconds : SamplingStop::go_on;
  const bool dependent = tp.autocorrelated_ci;
  if (median_ci_rel(candidate_ms, dependent) <= tp.target_rel_spread &&
      median_ci_rel(library_ms, dependent) <= tp.target_rel_spread)
    return SamplingStop::medians;
  if (tp.paired_min_samples > 0 && n >= tp.paired_min_samples &&
      median_ci_rel(paired_ratios(candidate_ms, library_ms), dependent) <= tp.target_rel_spread)
    return SamplingStop::ratio;
  return seconds >= tp.max_seconds ? SamplingStop::max_seconds : SamplingStop::go_on;
}

void TimingStopRule::add(double candidate_ms, double library_ms, double seconds) {
  candidate_ms_.push_back(candidate_ms);
  library_ms_.push_back(library_ms);
  decision_ = sampling_stop(candidate_ms_, library_ms_, seconds, policy_);
}

std::optional<protocol::TimingStop> TimingStopRule::stopped_by() const {
  // The rule's names are the protocol's `stopped_by` names (go_on is none of them).
  return protocol::timing_stop_from_string(to_string(decision_));
}

}  // namespace ptxbench::worker::detail
