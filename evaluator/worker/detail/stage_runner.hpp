// The worker's stages over one job: correctness, timing, execution counts (in that order of running, so
// that no timed launch ever runs patched by CUPTI). One class holds what they share (the job, the device,
// the loaded candidate, the result written after each stage); each stage has its own source file:
// stage_runner.cpp (running order, result, launches), correctness_stage.cpp, timing_stage.cpp,
// execution_stage.cpp.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/profile.hpp"
#include "evaluator/protocol/timing.hpp"
#include "evaluator/worker/detail/candidate_kernel.hpp"
#include "evaluator/worker/detail/device_tensor.hpp"
#include "evaluator/worker/detail/protocol_names.hpp"
#include "evaluator/worker/detail/range_profiler.hpp"
#include "evaluator/worker/detail/worker_support.hpp"

namespace ptxbench::worker {
class FamilyHandler;  // family.hpp
}  // namespace ptxbench::worker

namespace ptxbench::worker::detail {

class Worker {
 public:
  Worker(Job job, std::string result_path, Device device, json worker_figures);

  /// Runs the stages the job asks for; returns the exit code (a fatal stage exits the process instead).
  int run();

 private:
  // ---- result bookkeeping ---------------------------------------------------------------
  void flush();
  void set_stage(const std::string &name, protocol::StageResult stage);
  void finish();
  /// A stage ended the worker (runtime_error, timeout, launch_error): record and exit now.
  /// _Exit: no destructors, since a faulted or hung context must not be touched again.
  [[noreturn]] void fatal(const std::string &stage, Status status, const std::string &summary,
                          json figures = json::object());

  std::string launch_context(const JobWorkload &w, const std::string &what) const;

  /// Launches the candidate and waits with the hang deadline; any failure ends the worker.
  /// deadline_ms < 0: the job's kernel-hang limit. instrumented: a launch under CUPTI, whose slowness is
  /// the instrumentation's, so running past the deadline skips the stage instead of calling it a hang.
  void launch_and_wait(const std::string &stage, const JobWorkload &w, detail::PackedParams &params,
                       const std::string &what, double deadline_ms = -1, bool instrumented = false);

  void wait_candidate(const std::string &stage, const JobWorkload &w, const std::string &what,
                      double deadline_ms = -1, bool instrumented = false);

  void prepare(const std::string &stage, const JobWorkload &w);

  void pack(const std::string &stage, const JobWorkload &w, const TensorSet &tensors,
            detail::PackedParams &out);

  void fill_inputs(const WorkloadSpec &spec, const TensorSet &tensors, std::uint64_t seed);

  void poison_outputs(const WorkloadSpec &spec, const TensorSet &tensors);

  /// The workload's workspace (launch.workspace_bytes > 0), allocated from `pool` with guard regions
  /// and added to `tensors` under protocol::kWorkspaceName; nothing when the launch declares none.
  void add_workspace(const JobWorkload &w, BufferPool &pool, TensorSet &tensors);
  /// Zero-fills the workspace in `tensors` (if any) on the stream: called before every candidate
  /// launch, and in the timing stage before the L2 flush and the start event, so it is never timed.
  void reset_workspace(const TensorSet &tensors);

  /// Shown workload `wi`'s tensors from `pool`: its inputs copied from the first correctness trial kept for
  /// timing, or freshly filled (seed: the base seed ^ `seed_salt`) when none was kept; outputs not poisoned.
  TensorSet workload_tensors(std::size_t wi, BufferPool &pool, std::uint64_t seed_salt);

  std::uint64_t input_checksum(const WorkloadSpec &spec, const TensorSet &tensors);

  // Seconds per phase of a stage, for finding where evaluation time goes. Each mark waits for the
  // stream, so GPU work is charged to the phase that queued it.
  struct PhaseSeconds {
    cudaStream_t stream;
    Clock::time_point last = Clock::now();
    json seconds = json::object();
    void mark(const char *phase) {
      PTXB_CUDA(cudaStreamSynchronize(stream));
      const auto now = Clock::now();
      seconds[phase] = seconds.value(phase, 0.0) + std::chrono::duration<double>(now - last).count();
      last = now;
    }
  };

  // ---- correctness ---------------------------------------------------------------------
  bool correctness_stage();
  struct CorrectnessBuffers;  // one workload's tensors, reference, snapshots (correctness_stage.cpp)
  struct WorkloadCheck;       // one workload's trials, summed
  /// Sets stopped_early at the first failing trial unless every trial is asked for; a trial that fails only
  /// by values near the tolerance (borderline) lets the planned trials and the extra ones run first.
  /// `stage` names the stage a fault is charged to; `wi` keys the trial seeds and the inputs kept for timing.
  WorkloadCheck check_workload(const char *stage, const JobWorkload &w, std::size_t wi, PhaseSeconds &phases,
                               bool &stopped_early);
  /// One trial: fresh inputs, reference, launch, compare, guards and input checksum; true when it passed.
  bool run_trial(const char *stage, const JobWorkload &w, std::size_t wi, int trial, CorrectnessBuffers &b,
                 PhaseSeconds &phases, WorkloadCheck &c);
  /// A second identical launch gives the same bits.
  bool same_bits_on_relaunch(const char *stage, const JobWorkload &w, CorrectnessBuffers &b);
  std::string correctness_failure_text(const JobWorkload &w, const WorkloadCheck &c) const;
  /// "borderline: the largest error is 0.93x the tolerance; 8 extra trials ..., 0 of 11 trials failed".
  static std::string margin_text(const WorkloadCheck &c);
  /// One workload's row of correctness figures.
  protocol::CorrectnessWorkload workload_row(const JobWorkload &w, const WorkloadCheck &c) const;

  // ---- generalization (the hidden workloads) --------------------------------------------
  /// Hidden workload i is keyed kHiddenIndexBase + i for its trial seeds and kept inputs, apart from
  /// the shown workloads' indices.
  static constexpr std::size_t kHiddenIndexBase = 1'000'000;
  /// Checks every hidden workload (after the shown workloads' stages): skipped when `correct` is false.
  void generalization_stage(bool correct);

  // A correctness trial's inputs and fp32 reference, kept (copied before the candidate ran) as one of
  // the timing stage's input sets: see TimingPolicy::reuse_correctness_inputs. Kept only while the GPU
  // has room for them beside 2 GiB of headroom; otherwise timing draws its own sets.
  void keep_for_timing(std::size_t wi, int trial, const WorkloadSpec &spec, const TensorSet &tensors,
                       const ReferenceSet &reference);

  // ---- timing ---------------------------------------------------------------------------
  void timing_stage();
  struct TimingRun;      // the stage's state across workloads (timing_stage.cpp)
  struct TimingInputs;   // one workload's input sets
  struct TimingSamples;  // one workload's samples
  /// false: the library could not run here (the stage is written as skipped).
  /// `wi` keys the kept correctness inputs; run.stage names the stage a fault is charged to.
  bool time_workload(const JobWorkload &w, std::size_t wi, TimingRun &run);
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

  // ---- execution (CUPTI SASS metrics) --------------------------------------------------
  // The orchestrator disassembles the cubin while the first stages run; wait for its listing here.
  // "" when it arrived (or was in the job), else why there is none.
  std::string await_sass_listing();

  void execution_stage(bool correct);
  /// The stage's result when it launches nothing instrumented (detail::plan_instrumentation): no target
  /// in the SASS (the axis is false), counts that would only feed the feedback and pass the budget, or
  /// no SASS listing to join the counts with. nullopt: count.
  std::optional<protocol::StageResult> execution_skipped(bool correct, Clock::time_point start);

  // ---- profile (CUPTI range profiler; profile_stage.cpp) ---------------------------------
  /// Hardware metrics of one launch of a correct kernel, beside the library's; skipped when not correct
  /// or when one launch per pass does not fit ProfilePolicy::budget.
  void profile_stage(bool correct);
  /// Records the profile stage as skipped: `passes` replays of a `launch_ms` launch exceed the budget.
  void profile_too_slow(double launch_ms, const std::string &passes, Clock::time_point start);
  /// Passes of the candidate's launch that fit ProfilePolicy::budget; nullopt when not one (or fewer than the
  /// metrics are known to need) fits, with the skipped stage recorded.
  std::optional<int> profile_max_passes(double launch_ms, Clock::time_point start);
  /// Launches of `launch_ms` sampled together (ProfilePolicy::pc_sampling_min_time).
  int sampled_launches(double launch_ms) const;
  /// Selection-cache key of the metric catalog's pass count on this GPU.
  static std::string profile_passes_key();
  /// The range profiler's figures of one launch of the candidate (outputs poisoned before each pass).
  RangeMetrics profile_candidate(const JobWorkload &w, TensorSet &tensors, detail::PackedParams &params,
                                 int max_passes);
  /// The library's figures for the workload's shape: from the selection cache, else measured and cached;
  /// nullopt when not measured. `source`: "cached", "measured" or why not.
  std::optional<std::map<std::string, double>> library_figures(const JobWorkload &w, const TensorSet &tensors,
                                                               std::string &source);
  /// sample_launch when the launch and the sampler's set-up fit ProfilePolicy::pc_sampling_budget, else
  /// why not (in `unavailable`).
  protocol::PcSampling pc_sampling_within_budget(const JobWorkload &w, const TensorSet &tensors,
                                                 detail::PackedParams &params,
                                                 const std::map<std::string, double> &measured,
                                                 double launch_ms, json &phase_seconds);
  /// Theoretical occupancy of the workload's launch and its limiter (and resident clusters).
  protocol::Occupancy occupancy(const JobWorkload &w) const;
  /// The library's metrics on the same inputs into `out`; "measured", or why not.
  std::string profile_library(const JobWorkload &w, const TensorSet &inputs,
                              const std::vector<std::string> &names, std::map<std::string, double> &out);
  /// PC sampling of one more launch: the kernel's warp states and its most sampled PCs. `measured` (the
  /// range profiler's figures) sets the sampling period from the launch's duration and clock. The
  /// sampler's steps add their seconds to `phase_seconds` (keys "pc_sampling_<step>").
  protocol::PcSampling sample_launch(const JobWorkload &w, const TensorSet &tensors,
                                     detail::PackedParams &params,
                                     const std::map<std::string, double> &measured, double launch_ms,
                                     json &phase_seconds);

  double kernel_hang_ms() const;                 ///< ms
  double incorrect_execution_budget_ms() const;  ///< ms

  Job job_;
  std::string result_path_;
  Device device_;
  protocol::WorkerResult result_;
  double slowest_launch_ms_ =
      0;  ///< ms: slowest median candidate launch timed so far (sizes the instrumented deadline)
  double correctness_launch_ms_ = 0;  ///< ms: slowest correctness launch, wall clock (launch + wait)
  double extra_trial_seconds_ = 0;    ///< s: borderline extra trials so far (BorderlinePolicy::budget)
  struct KeptInputs {
    TensorSet inputs;   ///< non-output tensors only
    ReferenceSet refs;  ///< fp32 reference of each output
  };
  std::map<std::size_t, std::vector<KeptInputs>> kept_;  ///< workload index -> kept trials, in trial order
  std::unique_ptr<BufferPool> kept_pool_;                ///< owns kept_'s buffers
  std::unique_ptr<FamilyHandler> family_;
  detail::CandidateKernel kernel_;
};

}  // namespace ptxbench::worker::detail
