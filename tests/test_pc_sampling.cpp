// PC sampling's pure parts (evaluator/worker/detail/pc_sampling): the sampling period chosen from a launch,
// and CUPTI's warp-state names as the record keeps them. The sampling itself needs a GPU (test_gpu_gemm).
#include <doctest/doctest.h>

#include <cmath>

#include "evaluator/worker/detail/pc_sampling.hpp"

namespace wd = ptxbench::worker::detail;

TEST_CASE("pc sampling: the period gives about the samples aimed at, within CUPTI's range") {
  // A 5.4 ms launch on 132 SMs at 1.8 GHz: 1.28e9 SM cycles; 1e5 samples -> one per ~12800 cycles -> 2^14.
  CHECK(wd::pc_sampling_period_log2(5.4, 132, 1800, 1e5) == 14);
  // Each doubling of the launch doubles the period (one step of log2).
  CHECK(wd::pc_sampling_period_log2(10.8, 132, 1800, 1e5) == 15);
  // Samples actually collected stay within a factor of sqrt(2) of the aim (rounding of log2).
  for (double ms : {0.05, 0.9, 3.3, 13.8, 120.0}) {
    const int p = wd::pc_sampling_period_log2(ms, 132, 1755, 1e5);
    const double samples = ms * 1e-3 * 1755e6 * 132 / std::ldexp(1.0, p);
    CAPTURE(ms);
    CHECK(samples > 1e5 / 1.42);
    CHECK(samples < 1e5 * 1.42);
  }
  // Bounds: a tiny launch does not go below 2^5, an absurd one not above 2^31; bad inputs stay in range.
  CHECK(wd::pc_sampling_period_log2(1e-6, 1, 100, 1e7) == 5);
  CHECK(wd::pc_sampling_period_log2(1e9, 1000, 3000, 1) == 31);
  CHECK(wd::pc_sampling_period_log2(0, 0, 0, 0) >= 5);
}

TEST_CASE("pc sampling: warp-state names lose CUPTI's prefix; the _not_issued duplicates are dropped") {
  CHECK(wd::short_stall_reason("smsp__pcsamp_warps_issue_stalled_short_scoreboard") == "short_scoreboard");
  CHECK(wd::short_stall_reason("smsp__pcsamp_warps_issue_stalled_barrier") == "barrier");
  CHECK(wd::short_stall_reason("smsp__pcsamp_warps_issue_stalled_barrier_not_issued") == "");
  CHECK(wd::short_stall_reason("smsp__pcsamp_sample_count") == "sample_count");
  CHECK(wd::short_stall_reason("something_else") == "something_else");
}

TEST_CASE(
    "pc sampling: a short kernel is sampled over enough launches for the minimum time, at most the cap") {
  CHECK(wd::pc_sampling_launches(0.01, 1.0, 32) == 32);  // 10 us: 100 launches wanted, capped
  CHECK(wd::pc_sampling_launches(0.3, 1.0, 32) == 4);    // 0.3 ms: 4 launches make 1.2 ms
  CHECK(wd::pc_sampling_launches(0.25, 1.0, 32) == 4);   // exactly 1 ms in 4
  CHECK(wd::pc_sampling_launches(0.9, 1.0, 32) == 2);
  CHECK(wd::pc_sampling_launches(1.0, 1.0, 32) == 1);  // long enough: once
  CHECK(wd::pc_sampling_launches(25.0, 1.0, 32) == 1);
  CHECK(wd::pc_sampling_launches(0.01, 0.0, 32) == 1);  // no minimum: once
  CHECK(wd::pc_sampling_launches(0.0, 1.0, 32) == 32);  // unknown duration: the cap, never zero or overflow
  CHECK(wd::pc_sampling_launches(0.01, 1.0, 0) == 1);
}
