// Per-kernel profiler ranges combined into one set of figures (evaluator/worker/detail/range_combine): a
// library call of several kernels gets one figure per metric, weighted by each kernel's duration.
#include <doctest/doctest.h>

#include "evaluator/worker/detail/range_combine.hpp"

namespace wd = ptxbench::worker::detail;

TEST_CASE("range combine: one kernel's figures come back unchanged") {
  const std::map<std::string, double> one = {
      {"gpu__time_duration.sum", 250000.0}, {"lts__t_sector_hit_rate.pct", 61.5}, {"dram__bytes.sum", 1.5e9}};
  CHECK(wd::combine_kernel_ranges({one}) == one);
}

TEST_CASE("range combine: sums add, extremes stay extremes, shares are duration-weighted means") {
  // A 300 us kernel at 90% tensor pipe, then a 100 us one at 10%: 400 us at (0.9*300 + 0.1*100)/400 = 70%.
  const std::map<std::string, double> main_kernel = {
      {"gpu__time_duration.sum", 300000.0},
      {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 90.0},
      {"dram__bytes.sum", 3.0e8},
      {"sm__cycles_elapsed.max", 500.0},
      {"sm__cycles_elapsed.min", 400.0}};
  const std::map<std::string, double> reduction = {
      {"gpu__time_duration.sum", 100000.0},
      {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 10.0},
      {"dram__bytes.sum", 1.0e8},
      {"sm__cycles_elapsed.max", 200.0},
      {"sm__cycles_elapsed.min", 100.0}};
  const auto c = wd::combine_kernel_ranges({main_kernel, reduction});
  CHECK(c.at("gpu__time_duration.sum") == doctest::Approx(400000.0));
  CHECK(c.at("dram__bytes.sum") == doctest::Approx(4.0e8));
  CHECK(c.at("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active") == doctest::Approx(70.0));
  CHECK(c.at("sm__cycles_elapsed.max") == doctest::Approx(500.0));
  CHECK(c.at("sm__cycles_elapsed.min") == doctest::Approx(100.0));
  // The order of the kernels does not matter.
  CHECK(wd::combine_kernel_ranges({reduction, main_kernel}) == c);
}

TEST_CASE("range combine: without durations every kernel weighs the same; a metric one kernel lacks") {
  const auto c = wd::combine_kernel_ranges({{{"lts__t_sector_hit_rate.pct", 40.0}, {"x.per_second", 2.0}},
                                            {{"lts__t_sector_hit_rate.pct", 80.0}}});
  CHECK(c.at("lts__t_sector_hit_rate.pct") == doctest::Approx(60.0));
  CHECK(c.at("x.per_second") == doctest::Approx(2.0));  // averaged over the kernels that have it
  CHECK(wd::combine_kernel_ranges({}).empty());
}
