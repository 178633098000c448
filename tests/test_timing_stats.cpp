// The timing stage's statistics and its stopping rule, the function and the TimingStopRule object
// (evaluator/worker/detail/timing_stats): pure code, so their cases run without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
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

namespace {

/// Feeds `cand` and `lib` pair by pair (the pair i read at `seconds[i]`) to a TimingStopRule and checks
/// that after each pair it decides as sampling_stop() does on the pairs so far; returns the pair count at
/// the rule's stop (0 when it never stopped).
std::size_t check_rule_against_function(const std::vector<double> &cand, const std::vector<double> &lib,
                                        const std::vector<double> &seconds,
                                        const ptxbench::protocol::TimingPolicy &tp) {
  wd::TimingStopRule rule(tp);
  CHECK_FALSE(rule.should_stop());
  CHECK_FALSE(rule.stopped_by().has_value());
  std::vector<double> c, l;
  for (std::size_t i = 0; i < cand.size(); ++i) {
    c.push_back(cand[i]);
    l.push_back(lib[i]);
    rule.add(cand[i], lib[i], seconds[i]);
    const wd::SamplingStop expected = wd::sampling_stop(c, l, seconds[i], tp);
    REQUIRE(rule.should_stop() == (expected != wd::SamplingStop::go_on));
    if (expected == wd::SamplingStop::go_on) {
      CHECK_FALSE(rule.stopped_by().has_value());
      continue;
    }
    REQUIRE(rule.stopped_by().has_value());
    CHECK(ptxbench::protocol::to_string(*rule.stopped_by()) == wd::to_string(expected));
    return i + 1;
  }
  return 0;
}

}  // namespace

TEST_CASE("timing stop rule object: each way of stopping, pair by pair as the function decides") {
  namespace protocol = ptxbench::protocol;
  const protocol::TimingPolicy defaults;  // min_samples 10, min_seconds 0.25, paired_min_samples 30
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> noise(0.999, 1.001), drift(0.95, 1.05);
  std::vector<double> cand, lib, seconds;
  const auto add = [&](double c, double l, double s) {
    cand.push_back(c);
    lib.push_back(l);
    seconds.push_back(s);
  };

  // far_from_library: a kernel at about 0.013x stops at the third pair (far_min_samples).
  for (int i = 0; i < 10; ++i) add(576.0 * noise(rng), 7.5 * noise(rng), 0.6 * (i + 1));
  CHECK(check_rule_against_function(cand, lib, seconds, defaults) == 3);
  {
    wd::TimingStopRule rule(defaults);
    for (int i = 0; i < 3; ++i) rule.add(cand[i], lib[i], seconds[i]);
    CHECK(rule.stopped_by() == protocol::TimingStop::far_from_library);
  }

  // medians: steady samples near the library settle both medians' CIs once min_samples and min_seconds
  // are in; not before min_seconds.
  cand.clear(), lib.clear(), seconds.clear();
  for (int i = 0; i < 40; ++i) add(1.0 * noise(rng), 1.1 * noise(rng), 0.01 * (i + 1));
  CHECK(check_rule_against_function(cand, lib, seconds, defaults) == 25);  // 0.25 s at the 25th pair
  {
    wd::TimingStopRule rule(defaults);
    for (int i = 0; i < 25; ++i) rule.add(cand[i], lib[i], seconds[i]);
    CHECK(rule.stopped_by() == protocol::TimingStop::medians);
  }

  // ratio: a drift both series share keeps each median's CI wide; the paired ratio settles at
  // paired_min_samples.
  cand.clear(), lib.clear(), seconds.clear();
  for (int i = 0; i < 60; ++i) {
    const double clock = drift(rng);
    add(13.6 * clock * noise(rng), 8.2 * clock * noise(rng), 0.5 + 0.01 * i);
  }
  const std::size_t at_ratio = check_rule_against_function(cand, lib, seconds, defaults);
  CHECK(at_ratio >= static_cast<std::size_t>(defaults.paired_min_samples));
  {
    wd::TimingStopRule rule(defaults);
    for (std::size_t i = 0; i < at_ratio; ++i) rule.add(cand[i], lib[i], seconds[i]);
    CHECK(rule.stopped_by() == protocol::TimingStop::ratio);
  }
  // Without the paired rule the same drift runs to the cap.
  protocol::TimingPolicy unpaired = defaults;
  unpaired.paired_min_samples = 0;
  unpaired.max_seconds = 0.8;
  const std::size_t at_cap = check_rule_against_function(cand, lib, seconds, unpaired);
  REQUIRE(at_cap > 0);
  CHECK(seconds[at_cap - 1] >= unpaired.max_seconds);
  {
    wd::TimingStopRule rule(unpaired);
    for (std::size_t i = 0; i < at_cap; ++i) rule.add(cand[i], lib[i], seconds[i]);
    CHECK(rule.stopped_by() == protocol::TimingStop::max_seconds);
  }
}

TEST_CASE("timing stop rule object: random series and policies decide as the function, every pair") {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::map<std::string, int> stops;  // stopped_by name (or "none") -> rounds
  for (int round = 0; round < 200; ++round) {
    ptxbench::protocol::TimingPolicy tp;
    tp.min_samples = 1 + static_cast<int>(unit(rng) * 20);
    tp.min_seconds = unit(rng) * 0.5;
    tp.max_seconds = 0.2 + unit(rng) * 2;
    tp.target_rel_spread = 0.001 + unit(rng) * 0.02;
    tp.paired_min_samples = round % 3 == 0 ? 0 : static_cast<int>(unit(rng) * 40);
    tp.autocorrelated_ci = round % 2 == 0;
    tp.far_from_library_speedup = round % 4 == 0 ? 0 : unit(rng) * 0.5;
    tp.far_min_samples = 2 + static_cast<int>(unit(rng) * 5);
    const double speedup = 0.01 + unit(rng) * 2, spread = unit(rng) * 0.1;
    std::vector<double> cand, lib, seconds;
    for (int i = 0; i < 120; ++i) {
      const double clock = 1 + spread * (unit(rng) - 0.5);
      cand.push_back(2.0 * clock * (1 + spread * (unit(rng) - 0.5)));
      lib.push_back(2.0 * speedup * clock * (1 + spread * (unit(rng) - 0.5)));
      seconds.push_back(0.025 * (i + 1));
    }
    const std::size_t pairs = check_rule_against_function(cand, lib, seconds, tp);
    wd::TimingStopRule rule(tp);
    for (std::size_t i = 0; i < pairs; ++i) rule.add(cand[i], lib[i], seconds[i]);
    ++stops[rule.stopped_by() ? std::string(ptxbench::protocol::to_string(*rule.stopped_by())) : "none"];
  }
  // The random policies reach every way of stopping.
  for (const char *way : {"far_from_library", "medians", "ratio", "max_seconds"}) CHECK(stops[way] > 0);
}
