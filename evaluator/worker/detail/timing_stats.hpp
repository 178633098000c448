// The timing stage's sample statistics: the median, the interquartile spread and the stopping rule's
// confidence interval of the median; and the stopping rule itself, as a function of the samples so far
// and as an object fed one pair at a time (TimingStopRule, like nvbench's stopping criteria).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "evaluator/protocol/policies.hpp"
#include "evaluator/protocol/timing.hpp"

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

/// A 95% confidence interval of the typical ratio: exp(mean ± t·sd/√n) of the logs of `ratios`
/// (Student's t with n−1 degrees of freedom), so a handful of steady samples already bound it tightly.
/// {0, +inf} with fewer than 2 positive values.
struct RatioInterval {
  double lo = 0;
  double hi = 0;
};
RatioInterval ratio_interval_95(const std::vector<double> &ratios);

/// What ended a workload's sampling (recorded as the workload's `stopped_by`).
enum class SamplingStop {
  go_on,             ///< not yet
  far_from_library,  ///< the speedup's 95% interval lies below TimingPolicy::far_from_library_speedup
  medians,           ///< both medians' CIs settled
  ratio,             ///< the paired ratio's CI settled
  max_seconds,       ///< the cap
};
std::string_view to_string(SamplingStop s);

/// The stopping rule, after each pair of timed launches: candidate and library samples so far (ms, in
/// sampling order) and the seconds since sampling began.
SamplingStop sampling_stop(const std::vector<double> &candidate_ms, const std::vector<double> &library_ms,
                           double seconds, const protocol::TimingPolicy &tp);

/// The stopping rule of one workload's sampling as an object: fed each pair of timed launches as it comes,
/// it decides as sampling_stop() does on all the pairs so far.
class TimingStopRule {
 public:
  explicit TimingStopRule(const protocol::TimingPolicy &policy) : policy_(policy) {}

  /// One more pair of timed launches (ms each), and the seconds since sampling began, read after it.
  void add(double candidate_ms, double library_ms, double seconds);
  /// The latest pair ended the sampling (false before any pair).
  bool should_stop() const { return decision_ != SamplingStop::go_on; }
  /// What ended the sampling, by the protocol's `stopped_by` names; nullopt while it goes on.
  std::optional<protocol::TimingStop> stopped_by() const;

 private:
  protocol::TimingPolicy policy_;
  std::vector<double> candidate_ms_;             ///< ms, in sampling order
  std::vector<double> library_ms_;               ///< ms, in sampling order
  SamplingStop decision_ = SamplingStop::go_on;  ///< after the latest pair
};

/// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom (df >= 1; 1.96 past 120).
double student_t_975(int df);

}  // namespace ptxbench::worker::detail
