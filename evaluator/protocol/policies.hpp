// The policies that decide a verdict's GPU stages: how correctness is checked, how timing samples, and
// the worker's limits. One struct each with one JSON form, used alike by the run config, the verdict's
// recorded settings and the job the worker reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

namespace ptxbench::protocol {

/// bytes; every buffer a kernel is given (tensors, workspace) starts at a multiple of this, as the prompt
/// promises: cudaMalloc returns 256-byte aligned memory and the guard before the data is a multiple of it.
inline constexpr std::size_t kBufferAlignment = 256;
/// The guard region placed before and after every buffer: `guard_bytes` rounded up to kBufferAlignment.
constexpr std::size_t aligned_guard_bytes(std::size_t guard_bytes) {
  return (guard_bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// Verdicts near the tolerance edge. A workload's margin is the largest |got − expected| / (atol +
/// rtol·|expected|) over every element of every output and every trial run (1 = at the tolerance; the
/// device compare takes it over all elements). A workload is borderline when that ratio lies in [low,
/// high] and nothing else failed (no NaN, unwritten element, guard damage or input change). A borderline
/// workload gets up to extra_trials more trials (fresh inputs each, seeded like the others, so a run
/// repeats them), which estimate how often one trial fails. The status rule does not change: any failing
/// trial, planned or extra, makes the kernel incorrect; the flag and the failure rate say how near the
/// edge it is.
/// Why [0.6, 2]: a bf16 output rounded to nearest is off by at most half an ulp, 2^-8 relative, so an
/// honest GEMM against its rtol of 2^-7 stays near 0.5 (measured on an H100: 0.469 for the wgmma, mma.sync
/// and FFMA reference GEMMs alike; attention outputs 0.10-0.12), and a different fp32 summation order
/// can tip a rounding near its midpoint, so the band starts a little above; truncation or a coarser
/// intermediate (up to a whole ulp) reaches 1, where fresh inputs decide pass or fail. Past 2 the kernel
/// is plainly wrong.
struct BorderlinePolicy {
  double low = 0.6;      ///< error ratio (|error| / tolerance) from which a workload is borderline
  double high = 2.0;     ///< error ratio up to which it is; above, plainly wrong
  int extra_trials = 8;  ///< more trials per borderline workload at most; 0 = flag only
  /// ms; the extra trials of one job stop before one that would pass this (each is expected to take as
  /// long as the workload's last trial: fill, reference, launch, compare)
  std::chrono::milliseconds budget{2'000};
  PTXBENCH_PROTOCOL_EQUALITY(BorderlinePolicy)
};

/// Correctness protocol.
struct CorrectnessPolicy {
  int trials = 3;  ///< trials per workload, each with a fresh seed
  /// The job's seed for every input it fills (trial, workload and stage are mixed in). Non-zero: used as
  /// is (tests). 0 in the run config: derived from the run seed and the task (evaluator::task_input_seed),
  /// or, with no run seed, from the clock by the worker; the verdict records the seed used
  /// (settings.correctness_base_seed).
  std::uint64_t base_seed = 0;
  std::size_t guard_bytes = 4096;  ///< bytes of guard region before and after every buffer
  bool check_determinism = true;   ///< second identical launch must match bit for bit
  /// false: the first failing trial ends the stage (an incorrect verdict keeps that trial's diagnostics
  /// and skips the remaining trials); true: every trial runs and the counts cover them all
  bool all_trials = false;
  BorderlinePolicy borderline;  ///< extra trials for workloads near the tolerance
  PTXBENCH_PROTOCOL_EQUALITY(CorrectnessPolicy)
};

/// Timing protocol.
struct TimingPolicy {
  int warmup_launches = 3;  ///< untimed launches before sampling
  int min_samples = 10;     ///< at least this many timed samples each
  /// Stop when the median's relative 95% CI half-width, 1.57·IQR/(median·√n), is <= this (and
  /// min_seconds passed).
  double target_rel_spread = 0.005;
  /// seconds of sampling at least. The median-CI rule above decides when the figures are settled; this
  /// floor only keeps a lucky early run of samples from ending the loop.
  double min_seconds = 0.25;
  double max_seconds = 15.0;           ///< seconds of sampling at most (cap)
  double l2_flush_factor = 2.0;        ///< bytes written between samples = factor x L2 size
  int input_sets = 2;                  ///< input sets rotated between samples
  bool reverify_random_launch = true;  ///< re-check the output of one random timed launch
  double sol_slack = 0.9;              ///< time < sol_slack x speed-of-light floor -> suspicious
  /// After each timed launch the GPU idles for this multiple of the launch's time. Interleaved back to
  /// back, the power one kernel draws sets the clocks the other runs at (the library's time moves by
  /// several percent with the candidate beside it); idling decouples them.
  double cooldown_ratio = 1.0;
  /// ms; the idle after a launch is at most this. Longer idles let the clocks fall, and the library
  /// then runs slower after long idles beside a slow candidate.
  double cooldown_max_ms = 1.0;
  /// One untimed library launch (and an L2 flush) right before each timed one, so the library is timed
  /// after itself rather than after the candidate: beside a slow FFMA candidate, cuBLASLt's samples
  /// spread widely without it and are steady with it. The library is trusted code; the candidate gets
  /// no pre-roll, since a launch on the same inputs right before the timed one is what caching cheats
  /// feed on.
  bool library_preroll = true;
  /// true: the first input_sets correctness trials' inputs and fp32 references (copied before the
  /// candidate's launch) are the timing stage's input sets, so timing does not fill and run the reference
  /// again. false: timing draws and checks its own sets.
  bool reuse_correctness_inputs = true;
  /// true: each workload's timing figures also list every sample in ms, candidate and library, in
  /// sampling order (`candidate_samples_ms`, `library_samples_ms`), for studies of the spread
  bool record_samples = false;
  /// The speedup is the median of the per-iteration ratios library / candidate: the two launches of one
  /// iteration share the clocks and the thermal state, so their ratio cancels the drift both see and
  /// settles sooner than either median. Sampling also stops once that ratio's median CI is <=
  /// target_rel_spread after at least this many pairs. 0: speedup = library median / candidate median,
  /// and only the two medians' CIs end the sampling.
  int paired_min_samples = 30;
  /// true: the stopping rule's CIs count n·(1−ρ)/(1+ρ) samples, ρ = the series' lag-1 autocorrelation in
  /// sampling order (clamped to [0, 0.9]), since clocks and power drift slowly and neighbouring samples
  /// are alike. Off by default: it lengthens attention verdicts without making their speedups repeat
  /// closer (ARCHITECTURE.md, Timing). Every workload reports its ρ (lag1_autocorrelation) either way.
  bool autocorrelated_ci = false;
  /// Speedup (library / candidate) under which sampling stops early: once at least far_min_samples
  /// pairs are in and the upper end of the speedup's 95% confidence interval (a t-interval on the log
  /// ratios) lies below this, the figure is known well enough (stopped_by "far_from_library"; the
  /// interval is recorded). 0 = off. A naive kernel at 0.01x otherwise samples for seconds to pin a
  /// figure nobody needs to 0.5%.
  double far_from_library_speedup = 0.25;
  int far_min_samples = 3;  ///< pairs before the far_from_library rule may stop the sampling
  /// ms; untimed warm-up launches of the candidate stop once their estimated total (correctness-stage
  /// launch time x count) would pass this, so a slow kernel, already launched by every correctness
  /// trial in this process, gets none and a fast one all warmup_launches. 0 = always warmup_launches.
  double warmup_budget_ms = 50.0;
  PTXBENCH_PROTOCOL_EQUALITY(TimingPolicy)
};

/// The worker's limits. JSON: durations as seconds, keys ending in _seconds.
struct WorkerLimits {
  std::chrono::milliseconds wall{120'000};  ///< ms; the worker's process group is killed past it -> timeout
  std::chrono::milliseconds kernel_hang{10'000};  ///< ms; one launch that takes longer counts as a hang
  std::uint64_t cpu_seconds = 300;                ///< seconds of CPU time (RLIMIT_CPU)
  /// ms; an incorrect kernel's instructions are counted (execution stage) only when the instrumented
  /// launch is expected to take at most this long (200x its plain launch): a fast kernel's counts are
  /// cheap and help the repair feedback (a target that never runs); a slow kernel's would hold the GPU
  /// for longer than the rest of its verdict
  std::chrono::milliseconds incorrect_execution_budget{250};
  /// ms; a correct kernel with one target missing from its SASS (the targets axis is false already) has
  /// the others counted only when the instrumented launch is expected to take at most this long: a wgmma
  /// in the SASS that never runs is worth telling the model, a slow naive kernel's counts are not
  std::chrono::milliseconds partial_targets_execution_budget{2'000};
  /// true: the next worker process is started ahead (context, handles, CUPTI ready before its job)
  bool prestart = true;
  /// true: a pre-started worker also sets up the CUPTI profiler before its job, so the execution stage
  /// does not pay for it; the timings are the same with and without it (ARCHITECTURE.md).
  bool prestart_cupti = true;
  /// false: a pre-started worker's verdict is made as soon as it says its result is complete, and its
  /// teardown goes on under the GPU lock, overlapping the next candidate's CPU stages. true: the GPU
  /// stage waits for its exit.
  bool wait_for_exit = false;
  /// library selections (cuBLASLt algorithm, cuDNN plan) kept across workers; "" = the system temp dir
  std::filesystem::path selection_cache_dir;
  PTXBENCH_PROTOCOL_EQUALITY(WorkerLimits)
};

/// Which hardware metrics the profile stage measures (Nsight Compute's names). Written verbatim
/// (to_string) as `metrics`: never rename one.
enum class ProfileMetricSet {
  /// issue slots; the tensor, FMA, ALU and load/store pipes; DRAM, L2 and L1/shared throughput; DRAM
  /// bytes, L2 hit rate, achieved occupancy, duration and SM clock: 5 range-profiler passes on Hopper
  standard,
  /// standard plus Nsight Compute's two speed-of-light roll-ups, sm__throughput and
  /// gpu__compute_memory_throughput: 9 passes (sm__throughput alone needs 8), so each profiled launch is
  /// replayed almost twice as often
  full,
};
std::string_view to_string(ProfileMetricSet s);
void to_json(nlohmann::json &j, ProfileMetricSet s);
void from_json(const nlohmann::json &j, ProfileMetricSet &s);

/// The profile stage (hardware metrics of a correct kernel's launch, beside the library's).
/// JSON: durations as seconds, keys ending in _seconds.
struct ProfilePolicy {
  bool enabled = true;  ///< profile correct kernels (the figures feed the speed feedback)
  /// the metrics measured; `full` adds two roll-ups that cost four more replays of the launch
  ProfileMetricSet metrics = ProfileMetricSet::standard;
  /// ms; the stage is skipped (reason recorded) when its estimated GPU time, CUPTI's set-up plus the launch
  /// replayed once per profiler pass (5 for the standard metrics on Hopper, 9 for the full set) with the
  /// profiler's work around each, would pass this. 0.75 s profiles kernels up to about 15 ms per launch
  /// (every fast and mid-speed reference solution) and leaves the naive ones (a 26 ms GEMM, 180-580 ms
  /// attention kernels) to their timing figures, so their verdicts stay as cheap as without the stage
  std::chrono::milliseconds budget{750};
  /// true: the library's launch on the same workload is profiled too (once per workload shape and GPU,
  /// then read from the selection cache folder), so every figure can stand beside the library's
  bool library = true;
  /// true: one more launch is PC-sampled (CUPTI), so the feedback names the kernel's hot lines and why its
  /// warps stall there
  bool pc_sampling = true;
  /// ms; PC sampling's own allowance beside `budget`: CUPTI's sampling set-up (a few tenths of a second,
  /// most of it the first step after the sampler is enabled) plus the sampled launches; launches that would
  /// not fit are not sampled (reason recorded)
  std::chrono::milliseconds pc_sampling_budget{450};
  /// samples aimed at in that launch (the sampling period is chosen from the launch time, SM count and
  /// clock): enough for shares of a few percent per line to be stable to about a percentage point
  std::uint32_t pc_samples = 100000;
  /// ms; the sampled launch is repeated (outputs poisoned before each, at most 32 launches) until the
  /// launches add up to this much kernel time, so a kernel of a few microseconds is sampled over enough
  /// launches to give samples at all; launches at least this long are sampled once
  std::chrono::milliseconds pc_sampling_min_time{1};
  /// MiB; CUPTI's hardware buffer for the raw samples (0 = CUPTI's default, 512 MiB). Its size bounds the
  /// samples one sampled range can hold (pc_samples at some tens of bytes each fill a few MiB; a full buffer
  /// is reported, not hidden). 32, not CUPTI's 512: setting up the default buffer was most of the sampler's
  /// cost (about 0.2 s of its 0.3 s first step on an H100)
  std::uint32_t pc_sampling_hardware_buffer_mib = 32;
  /// ms; how long CUPTI's PC-sampling worker threads sleep between rounds (0 = CUPTI's default, 100 ms).
  /// They decode the raw samples and correlate them with the SASS of the module loaded for sampling, so
  /// the sampler's set-up and collection wait on their rounds
  std::uint32_t pc_sampling_worker_sleep_ms = 0;
  /// true: when kernel-serialized sampling collects no samples at all, sample once more in CUPTI's
  /// continuous mode (which may attribute samples to other kernels). Off by default: it costs a second
  /// sampling set-up
  bool pc_sampling_continuous_retry = false;
  PTXBENCH_PROTOCOL_EQUALITY(ProfilePolicy)
};

/// Each: every field, by its name; from_json takes absent fields from the defaults above and throws
/// ProtocolError (naming the field) on a wrong type, a value out of bounds or an unknown field.
void to_json(nlohmann::json &j, const BorderlinePolicy &p);
void from_json(const nlohmann::json &j, BorderlinePolicy &p);
void to_json(nlohmann::json &j, const CorrectnessPolicy &p);
void from_json(const nlohmann::json &j, CorrectnessPolicy &p);
void to_json(nlohmann::json &j, const TimingPolicy &p);
void from_json(const nlohmann::json &j, TimingPolicy &p);
void to_json(nlohmann::json &j, const WorkerLimits &p);
void from_json(const nlohmann::json &j, WorkerLimits &p);
void to_json(nlohmann::json &j, const ProfilePolicy &p);
void from_json(const nlohmann::json &j, ProfilePolicy &p);

}  // namespace ptxbench::protocol
