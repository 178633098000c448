// What the worker writes back (result.json) and how it exits. The worker rewrites the result
// atomically after each stage, so a crash keeps the stages that finished; the exit code says whether
// it ran to the end.
//
// result.json: {environment{...}, base_seed, stages: {correctness|execution|timing: StageResult},
//               finished: bool, fatal: {stage, status} | absent,
//               worker: {prestarted, phase_seconds{...}, prewarm_errors{...}, clock{job_received,
//               stages_start, finished} (steady-clock seconds, comparable with the evaluator's)} (the
//               worker's own time before the stages)}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

#include "evaluator/protocol/status.hpp"

namespace ptxbench::protocol {

/// Exit codes of ptxbench-worker.
namespace exit_code {
inline constexpr int kFinished = 0;  ///< every requested stage ran (whatever their verdicts)
inline constexpr int kBadJob = 2;    ///< unreadable or malformed job / arguments
/// a fatal outcome (runtime_error, timeout, launch_error) ended it; result.json says which stage
inline constexpr int kStopped = 3;
inline constexpr int kNoDevice = 4;   ///< no usable CUDA device or driver
inline constexpr int kInternal = 70;  ///< a bug in the worker (EX_SOFTWARE)
}  // namespace exit_code

/// The line a worker says on its protocol channel (worker_output.hpp; never stdout, which is the kernel's)
/// once its result file is complete, followed by the exit code it is about to return ("finished 0"): the
/// orchestrator reads the result then and lets the teardown run on while it goes on.
inline constexpr const char *kFinishedLinePrefix = "finished ";

/// One message a model (or a person) can act on.
struct Diagnostic {
  std::string severity = "error";  ///< "error" | "warning" | "note"
  std::string text;
  std::optional<int> line;  ///< 1-based line in the kernel source (PTX or CUDA), when known
  PTXBENCH_PROTOCOL_EQUALITY(Diagnostic)
};

struct StageResult {
  Status status = Status::skipped;
  std::string summary;  ///< one line; for skipped: the reason
  std::vector<Diagnostic> diagnostics;
  nlohmann::json figures = nlohmann::json::object();  ///< stage-specific numbers (see ARCHITECTURE.md)
  double wall_seconds = 0;                            ///< seconds spent in the stage
  PTXBENCH_PROTOCOL_EQUALITY(StageResult)
};

/// Which stage ended the worker, and how.
struct FatalStage {
  std::string stage;
  Status status = Status::runtime_error;
  PTXBENCH_PROTOCOL_EQUALITY(FatalStage)
};

struct WorkerResult {
  nlohmann::json environment = nlohmann::json::object();  ///< GPU, driver, library versions
  std::uint64_t base_seed = 0;                            ///< the correctness seed the worker used
  std::map<std::string, StageResult> stages;              ///< by stage name, those that finished
  bool finished = false;                                  ///< the worker ran every requested stage
  std::optional<FatalStage> fatal;
  nlohmann::json worker = nlohmann::json::object();  ///< where the worker's own time went
  PTXBENCH_PROTOCOL_EQUALITY(WorkerResult)
};

void to_json(nlohmann::json &j, const Diagnostic &d);
void from_json(const nlohmann::json &j, Diagnostic &d);
void to_json(nlohmann::json &j, const StageResult &s);
/// A status outside the enum is read as runtime_error whose summary and first diagnostic name it: a
/// worker (or trace) from another version gives a verdict that says so, not an exception.
void from_json(const nlohmann::json &j, StageResult &s);
void to_json(nlohmann::json &j, const FatalStage &f);
void from_json(const nlohmann::json &j, FatalStage &f);
void to_json(nlohmann::json &j, const WorkerResult &r);
/// Throws ProtocolError on a result that is not an object of that form.
void from_json(const nlohmann::json &j, WorkerResult &r);

/// The GPU stage a crash, kill or wall-limit hit is charged to, from the stages the job asked for
/// (`wanted`) and those the worker wrote before it: the generalization stage when it was writing a hidden
/// workload (its figures name one `in_progress`), else the first wanted stage in running order
/// (kGpuStageNames) it did not write, and "execution" when it wrote them all.
std::string crashed_stage(const std::map<std::string, StageResult> &written,
                          const std::vector<std::string> &wanted);

}  // namespace ptxbench::protocol
