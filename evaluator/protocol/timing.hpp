// The timing stage's figures: per workload the candidate's and the library's medians on cold L2, the
// paired speedup with its intervals, what ended the sampling, the re-checks of timed launches, and over
// all workloads the geometric-mean and smallest speedups. One codec: the worker fills TimingFigures and
// writes it as the timing stage's figures (a hidden workload's `timing` row in the generalization stage is
// a TimingWorkload too), the evaluator adds the policy it timed under, and every reader (the speedup axis,
// the feedback, `ptxbench show`, the service's reward) decodes it with `timing_figures_from_figures`.
//
// figures: {workloads: [TimingWorkload], geomean_speedup, min_speedup, sm_clock_mhz|null, library {name,
//   version, algo}, l2_flush_bytes, phase_seconds {phase: seconds}, policy (TimingPolicy, the evaluator's)}
// TimingWorkload: {name, candidate_ms, candidate_spread, library_ms, library_spread, speedup,
//   speedup_of_medians, candidate_tflops, library_tflops, sol_floor_ms|null, candidate_median_ci,
//   library_median_ci, speedup_ratio_ci, speedup_ci95 [lo, hi|null], warmup_launches,
//   lag1_autocorrelation {candidate, library, ratio}, stopped_by, sampling_seconds, samples,
//   library_samples, reverified null|{launch, input_set, mismatches, last_launch {launch, input_set,
//   mismatches}}, inputs_mutated, output_poison_ms, sm_clock_mhz_after|null, flops, bytes, peak_tflops,
//   peak_bandwidth_gbs[, candidate_samples_ms, library_samples_ms]}
//
// A field an older record lacks reads as its default below; a key the codec does not know is refused.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"
#include "evaluator/protocol/policies.hpp"

namespace ptxbench::protocol {

/// What ended a workload's sampling. Written verbatim (to_string) as `stopped_by`: never rename one.
enum class TimingStop {
  medians,           ///< both medians' 95% CIs settled within TimingPolicy::target_rel_spread
  ratio,             ///< the paired ratio library/candidate settled (after paired_min_samples pairs)
  far_from_library,  ///< the speedup's 95% interval lies below TimingPolicy::far_from_library_speedup
  max_seconds,       ///< the cap TimingPolicy::max_seconds
};
std::string_view to_string(TimingStop s);
/// nullopt for a name that is not one of the above.
std::optional<TimingStop> timing_stop_from_string(std::string_view name);

/// The output re-check of one timed candidate launch.
struct ReverifiedLaunch {
  int launch = 0;     ///< 1-based index of the timed candidate launch (count, not a time)
  int input_set = 0;  ///< 0-based input set it ran on
  std::uint64_t mismatches =
      0;  ///< output elements outside the tolerance (count); > 0 makes the stage suspicious
  PTXBENCH_PROTOCOL_EQUALITY(ReverifiedLaunch)
};

/// The timed launches whose outputs were checked again after the correctness trials passed; written as
/// null when neither was (TimingPolicy::reverify_random_launch off).
struct Reverified {
  /// A random one of the first min_samples timed launches; none when sampling stopped before it came.
  /// Its fields sit at the top of the object.
  std::optional<ReverifiedLaunch> random;
  std::optional<ReverifiedLaunch> last_launch;  ///< the last timed launch (under `last_launch`)
  PTXBENCH_PROTOCOL_EQUALITY(Reverified)
  bool empty() const { return !random && !last_launch; }
};

/// Lag-1 autocorrelation of each series in sampling order (unitless, clamped to [0, 0.9]).
struct TimingAutocorrelation {
  double candidate = 0;  ///< of the candidate's samples
  double library = 0;    ///< of the library's samples
  double ratio = 0;      ///< of the paired ratios library/candidate
  PTXBENCH_PROTOCOL_EQUALITY(TimingAutocorrelation)
};

/// x: 95% interval of a speedup (Student's t on the log paired ratios), [lo, hi]; {0, +inf} with fewer
/// than 2 pairs. A non-finite end travels as null and reads back as +inf.
struct SpeedupInterval {
  double lo = 0;
  double hi = std::numeric_limits<double>::infinity();
  PTXBENCH_PROTOCOL_EQUALITY(SpeedupInterval)
  /// Both ends finite and positive: the interval says something.
  bool bounded() const;
};

/// One workload's timing.
struct TimingWorkload {
  std::string name;               ///< the workload's name (the task's)
  double candidate_ms = 0;        ///< ms: median GPU time of the candidate's timed launches (cold L2)
  double candidate_spread = 1;    ///< unitless: (p75 - p25) / median of those; 1 with fewer than 4
  double library_ms = 0;          ///< ms: median GPU time of the library's timed launches
  double library_spread = 1;      ///< unitless: the same of the library's
  double speedup = 0;             ///< x: median of the paired ratios library/candidate (> 1: faster)
  double speedup_of_medians = 0;  ///< x: library_ms / candidate_ms (0 when candidate_ms is 0)
  double candidate_tflops = 0;    ///< TFLOP/s: the task's FLOPs / candidate_ms
  double library_tflops = 0;      ///< TFLOP/s: the task's FLOPs / library_ms
  /// ms: max(flops / peak FLOP/s, bytes / peak bytes/s), the speed-of-light floor; none (null) when it is
  /// not a finite number (the device's peak rates unknown)
  std::optional<double> sol_floor_ms;
  double candidate_median_ci = 1;  ///< unitless: relative half-width of the candidate median's ~95% CI
  double library_median_ci = 1;    ///< unitless: the same of the library's
  double speedup_ratio_ci = 1;     ///< unitless: the same of the paired ratios' median
  SpeedupInterval speedup_ci95;
  int warmup_launches = 0;  ///< untimed candidate launches before sampling (count)
  TimingAutocorrelation lag1_autocorrelation;
  TimingStop stopped_by = TimingStop::max_seconds;  ///< what ended the sampling
  double sampling_seconds = 0;                      ///< s: wall time of the sampling loop
  std::uint64_t samples = 0;                        ///< timed candidate launches (count)
  std::uint64_t library_samples = 0;                ///< timed library launches (count)
  Reverified reverified;
  bool inputs_mutated = false;  ///< an input set's checksum changed over the warm-ups and timed launches
  double output_poison_ms = 0;  ///< ms: median GPU time of the output poison before a timed launch
  std::optional<double> sm_clock_mhz_after;  ///< MHz: the SM clock right after sampling; none if unread
  double flops = 0;                          ///< FLOP: the task's work at this workload
  double bytes = 0;                          ///< bytes: the task's minimal DRAM traffic at this workload
  double peak_tflops = 0;         ///< TFLOP/s: dense tensor-core peak for the input type at max SM clock
  double peak_bandwidth_gbs = 0;  ///< GB/s: DRAM peak
  /// ms, in sampling order: every timed launch, only with TimingPolicy::record_samples (else absent)
  std::optional<std::vector<double>> candidate_samples_ms;
  std::optional<std::vector<double>> library_samples_ms;  ///< ms: the library's, likewise
  PTXBENCH_PROTOCOL_EQUALITY(TimingWorkload)
};

/// The reference library timed beside the candidate.
struct TimingLibrary {
  std::string name;     ///< "cuBLASLt", "cuDNN"
  std::string version;  ///< e.g. "13.0.0"
  /// the chosen algorithm(s) with their default vs best times; its form is the library family's own
  /// (cuBLASLt: candidates, best/default, config), shown as is and read by no decision
  nlohmann::json algo = nlohmann::json::object();
  PTXBENCH_PROTOCOL_EQUALITY(TimingLibrary)
};

struct TimingFigures {
  std::vector<TimingWorkload> workloads;  ///< in the job's order
  double geomean_speedup = 0;             ///< x: geometric mean of the workloads' speedups (the axis)
  double min_speedup = 0;                 ///< x: the smallest workload speedup
  std::optional<double> sm_clock_mhz;     ///< MHz: the SM clock after the last workload; none if unread
  TimingLibrary library;
  std::uint64_t l2_flush_bytes = 0;  ///< bytes written between samples to flush the L2
  /// s per phase: inputs, library_selection, warmup, sampling, output_poison
  std::map<std::string, double> phase_seconds;
  /// the policy it was timed under; set by the evaluator after the worker (absent in the worker's file)
  std::optional<TimingPolicy> policy;
  PTXBENCH_PROTOCOL_EQUALITY(TimingFigures)

  /// Whether some workload's sampling was stopped because the kernel is far below the library.
  bool far_from_library() const;
};

/// geomean_speedup and min_speedup from the workloads' speedups (0 and 0 without workloads).
void set_speedup_summary(TimingFigures &f);

void to_json(nlohmann::json &j, TimingStop s);
void from_json(const nlohmann::json &j, TimingStop &s);
void to_json(nlohmann::json &j, const SpeedupInterval &i);
void from_json(const nlohmann::json &j, SpeedupInterval &i);
void to_json(nlohmann::json &j, const ReverifiedLaunch &r);
void from_json(const nlohmann::json &j, ReverifiedLaunch &r);
void to_json(nlohmann::json &j, const Reverified &r);
void from_json(const nlohmann::json &j, Reverified &r);
void to_json(nlohmann::json &j, const TimingAutocorrelation &a);
void from_json(const nlohmann::json &j, TimingAutocorrelation &a);
void to_json(nlohmann::json &j, const TimingWorkload &w);
/// Throws ProtocolError naming the field on a row not of that form.
void from_json(const nlohmann::json &j, TimingWorkload &w);
void to_json(nlohmann::json &j, const TimingLibrary &l);
void from_json(const nlohmann::json &j, TimingLibrary &l);
void to_json(nlohmann::json &j, const TimingFigures &f);
/// Throws ProtocolError naming the field ("workloads[1].stopped_by") on figures not of that form.
void from_json(const nlohmann::json &j, TimingFigures &f);

/// The timing stage's figures; nullopt when the stage wrote none (skipped, or a fault before any workload
/// was timed: figures empty, or only the evaluator's `policy`). Throws ProtocolError naming the field
/// when they are malformed.
std::optional<TimingFigures> timing_figures_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
