// Interval estimates for reports: Wilson score intervals for rates and a
// seeded percentile bootstrap over trajectories for statistics that are not
// simple proportions (pass@k averaged over tasks, geomean speedup, paired
// differences between models).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace ptxbench::traces {

/// A two-sided interval [lo, hi] around a point estimate.
struct Interval {
  double lo = 0;
  double hi = 0;
};

/// z of a two-sided 95% normal interval.
inline constexpr double kZ95 = 1.959963984540054;

/// Wilson score interval of successes / trials (no continuity correction); nullopt when trials is 0.
/// Stays inside [0, 1] and is not degenerate at 0 or n successes, unlike the Wald interval.
std::optional<Interval> wilson_interval(int successes, int trials, double z = kZ95);

/// Settings of the bootstrap; recorded in the report so that its intervals can be reproduced.
struct BootstrapSettings {
  int resamples = 2000;           ///< bootstrap replicates per statistic; 0 = no bootstrap intervals
  std::uint64_t seed = 20261203;  ///< seeds every replicate stream (mixed with the statistic's name)
  double level = 0.95;            ///< central coverage of the percentile interval (0..1)
};

/// A deterministic random stream for one statistic: splitmix64 over (seed, FNV-1a of `stream`), so an
/// interval does not depend on which other statistics were computed before it.
class Resampler {
 public:
  Resampler(std::uint64_t seed, std::string_view stream);
  /// Uniform index in [0, n); n >= 1.
  std::size_t index(std::size_t n);

 private:
  std::uint64_t state_;
};

/// Percentile bootstrap: calls `replicate(resampler)` settings.resamples times; each call draws its own
/// resample with the resampler and returns the statistic, or nullopt when the resample has none (e.g.
/// no timed attempt; such replicates are left out). Returns the (1-level)/2 and (1+level)/2 quantiles of
/// the values (linear interpolation between order statistics), or nullopt when fewer than half the
/// replicates had a value or resamples is 0.
std::optional<Interval> percentile_bootstrap(
    const BootstrapSettings &settings, std::string_view stream,
    const std::function<std::optional<double>(Resampler &)> &replicate);

/// The q-quantile (0..1) of sorted values, linear between order statistics (type 7).
double quantile_sorted(const double *sorted, std::size_t n, double q);

}  // namespace ptxbench::traces
