// The stages' state types that more than one stage file uses (the generalization stage reuses the
// correctness check and the timing loop on the hidden workloads).
#pragma once

#include <algorithm>
#include <optional>
#include <random>
#include <thread>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/margin.hpp"
#include "evaluator/protocol/mismatch.hpp"
#include "evaluator/worker/detail/stage_runner.hpp"

namespace ptxbench::worker::detail {

/// One workload's trials, summed.
struct Worker::WorkloadCheck {
  std::optional<protocol::FirstMismatch> worst_first;  ///< of the first trial with mismatches
  std::optional<protocol::MismatchPattern> pattern;    ///< of the first trial with mismatches
  double max_abs = 0, max_rel = 0;
  std::uint64_t mismatches = 0, nans = 0, unwritten = 0, damage = 0;
  bool mutated = false, deterministic = true;
  int passed = 0, trials_run = 0, trials = 0;  ///< trials: planned; trials_run counts extra trials too
  protocol::WorkloadMargin margin;             ///< the largest error over tolerance; borderline extra trials
  bool ok() const { return passed == trials_run && trials_run >= trials; }
  /// A failure that is not a value near the tolerance.
  bool other_failure() const { return nans || unwritten || damage || mutated; }
};

/// What the stage keeps across workloads: its phases, the L2 flush scratch, the events, the re-check's
/// random launch, and the figures so far.
struct Worker::TimingRun {
  TimingRun(const TimingPolicy &policy, const DeviceFacts &facts, cudaStream_t s, std::uint64_t seed,
            const char *stage_name = "timing")
      : stage(stage_name),
        tp(policy),
        stream(s),
        phases{s},
        scratch_bytes(static_cast<std::size_t>(
            tp.l2_flush_factor * static_cast<double>(std::max<std::int64_t>(facts.l2_bytes, 1 << 20)))) {
    PTXB_CUDA(cudaMalloc(&scratch, scratch_bytes));
    PTXB_CUDA(cudaEventCreate(&ev_start));
    PTXB_CUDA(cudaEventCreate(&ev_stop));
    PTXB_CUDA(cudaEventCreate(&ev_poison_start));
    PTXB_CUDA(cudaEventCreate(&ev_poison_stop));
    rng.seed(seed ^ 0x7151ull);
  }
  ~TimingRun() { release(); }
  TimingRun(const TimingRun &) = delete;
  TimingRun &operator=(const TimingRun &) = delete;

  void release() {
    if (scratch) cudaFree(scratch);
    scratch = nullptr;
    if (ev_start) cudaEventDestroy(ev_start);
    if (ev_stop) cudaEventDestroy(ev_stop);
    if (ev_poison_start) cudaEventDestroy(ev_poison_start);
    if (ev_poison_stop) cudaEventDestroy(ev_poison_stop);
    ev_start = ev_stop = ev_poison_start = ev_poison_stop = nullptr;
  }
  void flush_l2() { PTXB_CUDA(cudaMemsetAsync(scratch, (++flush_counter) & 0xFF, scratch_bytes, stream)); }
  double elapsed_ms() const { return elapsed_ms(ev_start, ev_stop); }
  static double elapsed_ms(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    PTXB_CUDA(cudaEventElapsedTime(&ms, from, to));
    return static_cast<double>(ms);
  }
  // The stream is idle here (every sample is waited for), so the GPU idles while we sleep.
  void cool_down(double sample_ms) const {
    const double idle_ms = std::min(tp.cooldown_ratio * sample_ms, tp.cooldown_max_ms);
    if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
  }

  const char *stage;  ///< the stage a fault is charged to: "timing", or "generalization" (hidden workloads)
  const TimingPolicy &tp;
  cudaStream_t stream;
  PhaseSeconds phases;
  std::size_t scratch_bytes;
  void *scratch = nullptr;
  cudaEvent_t ev_start = nullptr, ev_stop = nullptr;
  /// Around the output poison before each timed candidate launch (outside the timed region).
  cudaEvent_t ev_poison_start = nullptr, ev_poison_stop = nullptr;
  std::mt19937_64 rng;
  int flush_counter = 0;
  /// The figures so far: workloads, library, L2 flush size (sm_clock_mhz, speedups and phases are set
  /// when the stage is written).
  protocol::TimingFigures figures;
  json diagnostics = json::array();
  std::string library_error;  ///< why the library could not run (time_workload returned false)
  bool suspicious = false;
  double sm_clock = 0;  ///< MHz after the latest workload; 0 = not read
};

}  // namespace ptxbench::worker::detail
