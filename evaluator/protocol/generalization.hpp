// The generalization stage's figures: the task's hidden workloads (never shown to the model), each checked
// with the correctness stage's trials and, when asked, timed. One codec: the worker's generalization stage
// (evaluator/worker/generalization_stage.cpp) fills GeneralizationFigures and writes it as the stage's
// figures, before each hidden workload (`in_progress` names it, so a fault there is charged to it) and at
// the end; readers (the evaluator's `decide_generalization`, the feedback's hidden mismatch pattern) decode
// it with `generalization_figures_from_figures` / `Verdict::generalization_figures()`.
//
// figures: {workloads: [HiddenWorkload], total, passed[, in_progress][, phase_seconds {phase: seconds}]}
// HiddenWorkload, checked: the CorrectnessWorkload's fields (its mismatch_pattern the coarse form) and
//   {kind "ok"|"incorrect"|"nondeterministic", correct[, timing TimingWorkload | {skipped: why}]}
// HiddenWorkload, skipped (this worker cannot evaluate the shape): {name, kind "skipped", reason}
//
// A field an older record lacks reads as its default (optional ones as none); a key the codec does not
// know is refused, and errors name the field ("workloads[1].timing.speedup").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/detail/equality.hpp"
#include "evaluator/protocol/timing.hpp"

namespace ptxbench::protocol {

/// How a hidden workload came out. Written verbatim (to_string) as `kind`: never rename one.
enum class HiddenKind {
  ok,                ///< every trial passed and the relaunch gave the same bits
  incorrect,         ///< some trial failed
  nondeterministic,  ///< the trials passed, the relaunch differed
  skipped,           ///< not checked: this worker cannot evaluate the shape (not the kernel's failure)
};
std::string_view to_string(HiddenKind k);
/// nullopt for a name that is not one of the above.
std::optional<HiddenKind> hidden_kind_from_string(std::string_view name);

struct HiddenWorkload {
  std::string name;  ///< the hidden workload's name (the task's)
  HiddenKind kind = HiddenKind::ok;
  std::string reason;  ///< skipped: why the shape could not be evaluated ("" otherwise)
  /// checked: its trials, as the correctness stage writes a workload (check->name is `name`); none when
  /// skipped
  std::optional<CorrectnessWorkload> check;
  std::optional<TimingWorkload> timing;       ///< timed (EvaluatorSettings::hidden.time) and it was timed
  std::optional<std::string> timing_skipped;  ///< asked to time it but not timed: why
  PTXBENCH_PROTOCOL_EQUALITY(HiddenWorkload)

  bool correct() const { return kind == HiddenKind::ok; }
};

struct GeneralizationFigures {
  std::vector<HiddenWorkload> workloads;  ///< in the job's order, as far as the stage got
  /// hidden workloads checked (skipped ones left out); while in progress, all of the job's (count)
  std::uint64_t total = 0;
  std::uint64_t passed = 0;  ///< correct ones (count)
  /// the workload running when this was written: a fault, hang or kill is charged to it; none once done
  std::optional<std::string> in_progress;
  /// s per phase (as the correctness stage's); none while in progress
  std::optional<std::map<std::string, double>> phase_seconds;
  PTXBENCH_PROTOCOL_EQUALITY(GeneralizationFigures)
};

void to_json(nlohmann::json &j, HiddenKind k);
void from_json(const nlohmann::json &j, HiddenKind &k);
void to_json(nlohmann::json &j, const HiddenWorkload &w);
/// Throws ProtocolError naming the field on a row not of either form.
void from_json(const nlohmann::json &j, HiddenWorkload &w);
void to_json(nlohmann::json &j, const GeneralizationFigures &f);
/// Throws ProtocolError naming the field ("workloads[0].kind") on figures not of that form.
void from_json(const nlohmann::json &j, GeneralizationFigures &f);

/// The generalization stage's figures; nullopt when it wrote none (skipped, or the task has no hidden
/// workloads). Throws ProtocolError naming the field when they are malformed.
std::optional<GeneralizationFigures> generalization_figures_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
