// The result of evaluating one candidate, as every reader sees it: a closed-enum status per stage, each
// stage's figures and messages, the three separate axes, and its one JSON codec. The evaluator makes it;
// the runner, traces (records, reports, exports), the service and bench read it through this header.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/cpu_stages.hpp"
#include "evaluator/protocol/execution.hpp"
#include "evaluator/protocol/generalization.hpp"
#include "evaluator/protocol/profile.hpp"
#include "evaluator/protocol/result.hpp"
#include "evaluator/protocol/sanitizer.hpp"
#include "evaluator/protocol/stages.hpp"
#include "evaluator/protocol/status.hpp"
#include "evaluator/protocol/timing.hpp"
#include "evaluator/protocol/worker_output.hpp"

namespace ptxbench::protocol {

/// The verdict's three axes. nullopt = not measured.
struct Axes {
  std::optional<bool> correct;
  std::optional<bool> targets_executed;
  std::optional<double> speedup;  ///< geomean over workloads of library_time / candidate_time
};

/// The machine could not run the GPU stage (the worker client decides it where it happens, never from a
/// message). A verdict carrying one is not kept by the verdict cache: the next try may find the machine
/// able.
enum class MachineFault {
  worker_not_started,  ///< the worker process could not be started
  no_device,           ///< the worker found no usable GPU (its exit code says so)
  gpu_lock,            ///< the per-GPU lock file could not be opened
  /// the worker was killed by a signal the evaluator did not send (SIGKILL, SIGTERM, SIGINT, SIGHUP,
  /// SIGQUIT: the OOM killer, an operator, a job scheduler); the evaluator's own wall limit is a timeout
  worker_killed,
};

std::string_view to_string(MachineFault fault);
std::optional<MachineFault> machine_fault_from_string(std::string_view name);

/// The hidden workloads' outcome (tasks::Task::hidden_workloads), kept beside the three axes so that the
/// axes keep their meaning on the shown workloads: a kernel right only for the shapes it was shown is
/// correct there and does not generalize.
struct Generalization {
  std::optional<bool> value;  ///< every checked hidden workload correct; nullopt = not checked (`reason`)
  int passed = 0;             ///< hidden workloads correct
  int total = 0;              ///< hidden workloads checked
  /// One per hidden workload the kernel got wrong: its name, the kind of failure (incorrect,
  /// nondeterministic, bad_manifest, launch_error, runtime_error, timeout) and the harness's text.
  struct Failure {
    std::string workload, kind, summary;
    /// incorrect: the share (0..1) of output elements wrong, so feedback can say how much without
    /// giving the shape's size away
    std::optional<double> wrong_share;
  };
  std::vector<Failure> failed;
  nlohmann::json first_mismatch = nullptr;  ///< of the first incorrect hidden workload, as in correctness
  std::string reason;                       ///< why not checked (value nullopt)
  nlohmann::json to_json() const;
  static Generalization from_json(const nlohmann::json &j);
};

struct Verdict {
  Status status =
      Status::skipped;  ///< overall: the first stage that is not ok (skipped GPU stages leave it ok)
  std::string task_id;
  std::string kernel_hash;  ///< normalized kernel hash (comments/whitespace removed)
  StageResult parse;
  StageResult static_checks;
  StageResult compile;
  StageResult correctness;
  StageResult execution;
  StageResult timing;
  StageResult sanitizer;  ///< compute-sanitizer rerun on runtime_error/timeout/nondeterministic
  /// The worker's check of the hidden workloads; outside the pipeline: it never changes `status`.
  StageResult generalization;
  /// The profile stage (JSON key "profile" under stages): hardware metrics of a correct kernel's launch
  /// beside the library's; outside the pipeline: it never changes `status` or the axes.
  StageResult profiling;
  Axes axes;
  /// Whether the kernel is also right on the task's hidden workloads; nullopt when the task has none.
  std::optional<Generalization> generalizes;
  nlohmann::json settings = nlohmann::json::object();     ///< every policy/limit used (recorded in traces)
  nlohmann::json environment = nlohmann::json::object();  ///< GPU, driver, library versions, which GPU ran it
  double wall_seconds = 0;
  /// Where the GPU stage's wall time went outside the stages (lock wait, worker start or pre-started
  /// worker's readiness, its context/handles/CUPTI set-up, result handover), seconds.
  nlohmann::json profile = nlohmann::json::object();
  /// The kernel's device printf over every launch of its GPU stage (the worker's stdout, which carries
  /// nothing else), bounded: JSON key "kernel_output", absent when no worker ran the kernel.
  std::optional<KernelOutput> kernel_output;
  /// null: evaluated. Otherwise the verdict was copied from an identical earlier evaluation (verdict
  /// cache): {origin (e.g. "sample 2 turn 1"), key}; nothing ran for it.
  nlohmann::json reused_from = nullptr;
  /// Set when a GPU stage could not run for the machine's reasons (the worker client says so where it
  /// happens): the verdict says nothing about the kernel and the verdict cache does not keep it. JSON key
  /// "machine_fault" (its name), absent when none, so every other verdict reads as before.
  std::optional<MachineFault> machine_fault;
  /// The stages the JSON it was read from held (from_json), in table order; empty for a verdict made here.
  /// written() follows it, so a verdict read and written again keeps the stages it had (older verdicts
  /// lack some) and readers list only those.
  std::vector<Stage> stages_read;

  nlohmann::json to_json() const;
  /// Throws nlohmann::json::exception or ProtocolError on malformed input (not an object, stages not an
  /// object, a stage of the wrong shape); absent stages read as not run. A stage status
  /// outside the enum reads as runtime_error naming it (StageResult), and an unknown overall
  /// status is recomputed from the stages.
  static Verdict from_json(const nlohmann::json &j);
  /// Recomputes `status` from the stages (first non-ok, non-skipped stage in pipeline order).
  void finalize_status();
  /// The slot of a stage of the stage table (evaluator/protocol/stages.hpp).
  StageResult &stage(Stage s);
  const StageResult &stage(Stage s) const;
  /// Whether to_json writes the stage: for a verdict read from JSON, whether that JSON held it; otherwise
  /// every stage but generalization (only for a task with hidden workloads) and profile (only when it ran
  /// or says why not).
  bool written(Stage s) const;
  /// Marks every stage after `failed` that the table skips after a failure as skipped, saying which
  /// status ended the pipeline.
  void skip_from(Stage failed);
  /// Which stages skip_gpu_stages marks: all of the table's GPU stages (the hidden-workload result becomes
  /// "not checked"), or those of the shown workloads only (generalization and its result left as they
  /// are: the runner's GPU-less path).
  enum class GpuSkip { all, shown_workloads };
  /// Marks the table's GPU stages (correctness, execution, timing, sanitizer, generalization) skipped
  /// with `reason`; a hidden-workload result becomes "not checked" with it.
  void skip_gpu_stages(const std::string &reason, GpuSkip which = GpuSkip::all);
  /// The typed profile record of the profile stage; nullopt when nothing was measured.
  std::optional<KernelProfile> kernel_profile() const;
  /// The profile stage's figures (the profile and the stage's phase seconds); nullopt when it has none.
  std::optional<ProfileFigures> profile_figures() const;
  /// The typed figures of the timing stage, whatever its status (a suspicious stage has them too);
  /// nullopt when it timed nothing. Throws ProtocolError naming the field when malformed.
  std::optional<TimingFigures> timing_figures() const;
  /// The typed figures of the execution stage (counted, not instrumented, or skipped with its estimate);
  /// nullopt when it wrote none. Throws ProtocolError naming the field when malformed.
  std::optional<ExecutionFigures> execution_figures() const;
  /// The typed figures of the correctness stage; nullopt when it wrote none. Throws
  /// ProtocolError naming the field when malformed.
  std::optional<CorrectnessFigures> correctness_figures() const;
  /// The typed figures of the parse, static, compile, sanitizer and generalization stages; nullopt when
  /// the stage wrote none. Each throws ProtocolError naming the field when malformed.
  std::optional<ParseFigures> parse_figures() const;
  std::optional<StaticFigures> static_figures() const;
  std::optional<CompileFigures> compile_figures() const;
  std::optional<SanitizerFigures> sanitizer_figures() const;
  std::optional<GeneralizationFigures> generalization_figures() const;
};

}  // namespace ptxbench::protocol
