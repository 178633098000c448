// The timing stage's statistics and its stopping rule (evaluator/worker/detail/timing_stats): pure
// functions, so their cases run without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "evaluator/protocol/policies.hpp"
#include "evaluator/worker/detail/timing_stats.hpp"

namespace wd = ptxbench::worker::detail;

TEST_CASE("timing statistics: the paired ratio cancels a drift both series share") {
  // Clocks that wander by +-5% move the candidate and the library of one iteration alike: each median's
  // CI stays wide after 60 pairs while the ratio's settles, at the ratio the drift hides.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> drift(0.95, 1.05), noise(0.998, 1.002);
  std::vector<double> candidate, library;
  for (int i = 0; i < 60; ++i) {
    const double clock = drift(rng);
    candidate.push_back(13.6 * clock * noise(rng));
    library.push_back(8.2 * clock * noise(rng));
  }
  CHECK(wd::median_ci_rel(candidate) > 0.005);
  CHECK(wd::median_ci_rel(library) > 0.005);
  const std::vector<double> ratios = wd::paired_ratios(candidate, library);
  REQUIRE(ratios.size() == 60);
  CHECK(wd::median_ci_rel(ratios) < 0.002);
  CHECK(std::abs(wd::median_of(ratios) - 8.2 / 13.6) < 0.002);
  // Unequal lengths pair the common prefix; a non-positive candidate time makes no ratio.
  CHECK(wd::paired_ratios({2.0, 0.0, 4.0, 1.0}, {1.0, 1.0, 1.0}) == std::vector<double>{0.5, 0.25});
  CHECK(wd::median_ci_rel({1.0, 1.0, 1.0}) == 1);  // too few samples to settle anything
}

TEST_CASE("timing statistics: slowly drifting samples count for fewer; independent ones for all") {
  // A slow sine drift (period 40 samples) plus a little noise: neighbours are alike (rho near 0.9), so
  // the stopping rule must not take 40 of them for 40 independent draws.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> noise(-0.002, 0.002);
  std::vector<double> drifting, independent;
  for (int i = 0; i < 40; ++i) {
    drifting.push_back(2.8 * (1 + 0.02 * std::sin(2 * 3.14159265 * i / 40.0) + noise(rng)));
    independent.push_back(2.8 * (1 + 0.02 * std::sin(2 * 3.14159265 * ((i * 17) % 40) / 40.0) + noise(rng)));
  }
  CHECK(wd::lag1_autocorrelation(drifting) > 0.8);
  CHECK(wd::lag1_autocorrelation(drifting) <= 0.9);    // clamped: n_eff >= n/19
  CHECK(wd::lag1_autocorrelation(independent) < 0.3);  // the same values, shuffled
  CHECK(wd::median_ci_rel(drifting, true) > 2.5 * wd::median_ci_rel(drifting, false));
  CHECK(wd::median_ci_rel(independent, true) < 1.3 * wd::median_ci_rel(independent, false));
  CHECK(wd::lag1_autocorrelation({1.0, 2.0, 3.0}) == 0);               // too short to say
  CHECK(wd::lag1_autocorrelation(std::vector<double>(10, 1.0)) == 0);  // no spread
}

TEST_CASE("timing stop rule: far below the library stops after a few pairs; near it, the usual rule") {
  ptxbench::protocol::TimingPolicy tp;  // far_from_library_speedup 0.25, far_min_samples 3
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> noise(0.99, 1.01);
  // A naive kernel at about 0.013x: three pairs bound its speedup far below 0.25.
  std::vector<double> cand, lib;
  for (int i = 0; i < 2; ++i) {
    cand.push_back(576.0 * noise(rng));
    lib.push_back(7.5 * noise(rng));
  }
  CHECK(wd::sampling_stop(cand, lib, 1.2, tp) == wd::SamplingStop::go_on);  // 2 pairs: too few
  cand.push_back(576.0 * noise(rng));
  lib.push_back(7.5 * noise(rng));
  CHECK(wd::sampling_stop(cand, lib, 1.8, tp) == wd::SamplingStop::far_from_library);
  const wd::RatioInterval far = wd::ratio_interval_95(wd::paired_ratios(cand, lib));
  CHECK(far.lo < 7.5 / 576.0);
  CHECK(far.hi > 7.5 / 576.0);
  CHECK(far.hi < 0.02);
  CHECK(wd::to_string(wd::SamplingStop::far_from_library) == "far_from_library");
  // The other side of the threshold: a kernel at 0.3x is timed to the usual precision.
  std::vector<double> c2, l2;
  for (int i = 0; i < 5; ++i) {
    c2.push_back(10.0 * noise(rng));
    l2.push_back(3.0 * noise(rng));
  }
  CHECK(wd::sampling_stop(c2, l2, 0.1, tp) == wd::SamplingStop::go_on);
  // Just below the threshold but noisy: the interval's upper end crosses 0.25, so sampling goes on.
  std::vector<double> c3 = {10.0, 10.0, 10.0}, l3 = {2.0, 2.6, 2.3};
  CHECK(wd::ratio_interval_95(wd::paired_ratios(c3, l3)).hi > 0.25);
  CHECK(wd::sampling_stop(c3, l3, 0.1, tp) == wd::SamplingStop::go_on);
  // Off: the far rule never fires.
  tp.far_from_library_speedup = 0;
  CHECK(wd::sampling_stop(cand, lib, 1.8, tp) == wd::SamplingStop::go_on);
  // The cap still ends a loop that never settles.
  CHECK(wd::sampling_stop(cand, lib, tp.max_seconds + 1, tp) == wd::SamplingStop::max_seconds);
  CHECK(wd::student_t_975(1) > 12.7);
  CHECK(wd::student_t_975(1000) == doctest::Approx(1.96));
}
