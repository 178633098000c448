// The correctness stage's figures: per workload the trials run and passed against the fp32 reference, the
// errors, the first mismatching element and the pattern of the mismatches, NaN and unwritten outputs,
// writes outside a tensor, changed inputs, the determinism relaunch and the margin to the tolerance. One
// codec: the worker fills CorrectnessFigures and writes it as the correctness stage's figures, and every
// reader (the feedback, `ptxbench show`, the report's borderline count, the service's reward flags) decodes
// it with `correctness_figures_from_figures` / `Verdict::correctness_figures()`.
//
// figures: {workloads: [CorrectnessWorkload], base_seed, borderline, stopped_early, workloads_skipped,
//   slowest_launch_ms, phase_seconds {phase: seconds}}
// CorrectnessWorkload: {name, trials, trials_planned, passed, max_abs_error, max_rel_error, mismatches,
//   first_mismatch {tensor, index [..], got (a number, "NaN", or null when infinite), expected, trial,
//   unwritten} | null, mismatch_pattern (MismatchPattern) | null, nan_count, unwritten_count, guard_damage,
//   inputs_mutated, deterministic, margin (WorkloadMargin), output_elements}
//
// A field an older record lacks reads as its default below (no margin: none); a key the codec does not
// know is refused, and errors name the field ("workloads[1].first_mismatch.index").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"
#include "evaluator/protocol/margin.hpp"
#include "evaluator/protocol/mismatch.hpp"

namespace ptxbench::protocol {

/// The first mismatching element of the first trial with mismatches.
struct FirstMismatch {
  std::string tensor;               ///< the output tensor's name
  std::vector<std::int64_t> index;  ///< coordinates, outermost first
  /// what the kernel wrote: NaN travels as "NaN", an infinity as null (read back as +inf)
  double got = 0;
  double expected = 0;     ///< the fp32 reference's value (non-finite: null, read back as +inf)
  int trial = 0;           ///< 1-based trial
  bool unwritten = false;  ///< still the NaN poison: the kernel never wrote it
  PTXBENCH_PROTOCOL_EQUALITY(FirstMismatch)
};

/// One workload's trials, summed.
struct CorrectnessWorkload {
  std::string name;              ///< the workload's name (the task's)
  int trials = 0;                ///< trials run, planned and extra (count)
  int trials_planned = 0;        ///< trials the policy planned (count)
  int passed = 0;                ///< trials that passed (count)
  double max_abs_error = 0;      ///< the largest |got - expected| over every trial (infinite: null)
  double max_rel_error = 0;      ///< the largest |got - expected| / |expected| (infinite: null)
  std::uint64_t mismatches = 0;  ///< output elements outside the tolerance, over every trial (count)
  std::optional<FirstMismatch> first_mismatch;      ///< none (null) without mismatches
  std::optional<MismatchPattern> mismatch_pattern;  ///< of the first trial with mismatches; none (null)
  std::uint64_t nan_count = 0;                      ///< NaN outputs over every trial (count)
  std::uint64_t unwritten_count = 0;                ///< outputs still the poison over every trial (count)
  std::uint64_t guard_damage = 0;        ///< bytes changed in the guard regions around the tensors (count)
  bool inputs_mutated = false;           ///< an input's checksum changed over a launch
  bool deterministic = true;             ///< a second identical launch gave the same bits
  std::optional<WorkloadMargin> margin;  ///< none in records made before it existed (absent)
  std::uint64_t output_elements = 0;     ///< elements of the outputs per trial (count)
  PTXBENCH_PROTOCOL_EQUALITY(CorrectnessWorkload)

  /// Some trial failed, the relaunch differed, a guard was damaged or an input changed.
  bool failed() const { return passed < trials || !deterministic || guard_damage > 0 || inputs_mutated; }
};

struct CorrectnessFigures {
  std::vector<CorrectnessWorkload> workloads;  ///< those checked, in the job's order
  std::uint64_t base_seed = 0;                 ///< the inputs' seed (mixed with workload, trial, stage)
  bool borderline = false;                     ///< some workload's margin is borderline
  bool stopped_early = false;                  ///< the first failing trial ended the stage
  std::uint64_t workloads_skipped = 0;         ///< workloads not checked after it (count)
  double slowest_launch_ms = 0;                ///< ms: the slowest candidate launch of the stage
  /// s per phase: buffers, fill, reference, checks, candidate
  std::map<std::string, double> phase_seconds;
  PTXBENCH_PROTOCOL_EQUALITY(CorrectnessFigures)
};

void to_json(nlohmann::json &j, const FirstMismatch &m);
void from_json(const nlohmann::json &j, FirstMismatch &m);
void to_json(nlohmann::json &j, const CorrectnessWorkload &w);
/// Throws ProtocolError naming the field on a row not of that form.
void from_json(const nlohmann::json &j, CorrectnessWorkload &w);
void to_json(nlohmann::json &j, const CorrectnessFigures &f);
/// Throws ProtocolError naming the field ("workloads[0].passed") on figures not of that form.
void from_json(const nlohmann::json &j, CorrectnessFigures &f);

/// The correctness stage's figures; nullopt when the stage wrote none (skipped, or a fault before any
/// workload was checked). Throws ProtocolError naming the field when they are malformed.
std::optional<CorrectnessFigures> correctness_figures_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
