// The timing stage (timing_stage.cpp): candidate and library interleaved on cold L2, sampled until
// TimingStopRule (timing_stats.hpp) says the figures are settled. The generalization stage times the
// hidden workloads with the same time_workload.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>

#include "evaluator/protocol/timing.hpp"
#include "evaluator/worker/detail/stage_context.hpp"

namespace ptxbench::worker::detail {

class TimingStage {
 public:
  explicit TimingStage(StageContext &ctx) : ctx_(ctx) {}

  /// What the stage keeps across workloads: its phases, the L2 flush scratch, the events, the re-check's
  /// random launch, and the figures so far.
  struct TimingRun {
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

  /// Times every shown workload and writes the stage (skipped when the library cannot run here).
  void run();

  /// false: the library could not run here (the stage is written as skipped).
  /// `wi` keys the kept correctness inputs; run.stage names the stage a fault is charged to.
  bool time_workload(const JobWorkload &w, std::size_t wi, TimingRun &run);

 private:
  struct TimingInputs;   // one workload's input sets (timing_stage.cpp)
  struct TimingSamples;  // one workload's samples

  void timing_inputs(const char *stage, std::size_t wi, const JobWorkload &w, TimingInputs &in);
  /// Untimed candidate launches before sampling: TimingPolicy::warmup_launches, fewer for a slow kernel
  /// (warmup_budget_ms over its correctness-stage launch time).
  int candidate_warmups(const TimingPolicy &tp) const;
  /// Output elements of the candidate's latest launch outside tolerance against input set `set`'s reference.
  std::uint64_t wrong_outputs(const JobWorkload &w, const TimingInputs &in, int set);
  /// Candidate and library interleaved until the stopping rule or max_seconds.
  void sample_workload(const JobWorkload &w, TimingInputs &in, TimingRun &run, TimingSamples &out);
  void time_candidate_launch(const JobWorkload &w, TimingInputs &in, TimingRun &run, TimingSamples &out,
                             int i, int s, int reverify_at);
  protocol::TimingWorkload workload_timing(const JobWorkload &w, const TimingSamples &samples,
                                           double workload_clock, TimingRun &run);
  protocol::StageResult timing_result(const TimingRun &run, double wall_seconds) const;

  StageContext &ctx_;
};

}  // namespace ptxbench::worker::detail
