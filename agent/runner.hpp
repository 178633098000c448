// The repair loop: every trajectory (model × task × sample) is a
// turn state machine: messages -> request (per-endpoint limit) -> CPU stages
// (compile pool) -> GPU stage (one at a time per GPU) -> verdict -> feedback
// -> record -> next turn or stop. Many trajectories are in flight at once.
// Every turn is appended (fsynced) to <run dir>/trajectories.jsonl; a run
// killed at any point resumes without redoing or duplicating finished turns.
//
// What a run is given besides its config (RunServices, RunOptions) and how it ends (RunEnd) are declared
// in detail/runner_types.hpp, shared with the runner's state.
#pragma once

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/detail/runner_types.hpp"
#include "agent/run_config.hpp"
#include "evaluator/evaluator.hpp"
#include "llm_clients/chat_client.hpp"
#include "traces/record.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent {

namespace detail {
struct RunnerState;
}

/// `ptxbench-worker --probe` through util::run_process; {"error": ...} when it cannot run.
nlohmann::json probe_worker(const evaluator::EvaluatorSettings &settings);

/// Per model × task figures at the end of a run (over trajectories: "ever reached").
struct SummaryRow {
  std::string model;
  std::string task_id;
  int trajectories = 0;
  int turns = 0;
  int compiled = 0;                    ///< trajectories with a turn whose compile stage was ok
  int correct = 0;                     ///< ... whose axes.correct was true
  int executed = 0;                    ///< ... whose axes.targets_executed was true
  int gpu_skipped_turns = 0;           ///< turns whose GPU stages were skipped (no GPU)
  std::optional<double> best_speedup;  ///< over correct turns
  std::int64_t tokens = 0;             ///< prompt + completion
};

struct RunSummary {
  std::vector<SummaryRow> rows;
  int turns = 0;
  int trajectories = 0;
  int finished_trajectories = 0;  ///< last record has a stop_reason
  std::string table() const;      ///< fixed-width text table
};

/// One cell of a run (a trajectory: model × task × sample) and the shard it goes to (0 without config.shard).
struct PlannedCell {
  std::string trajectory_id;  ///< "<model>/<task>/<sample>"
  int shard = 0;
};
/// The run's cells in the runner's order (model, task, sample). Error: the task selection failed.
util::Expected<std::vector<PlannedCell>> plan_cells(const RunConfig &config);

/// Computes the summary from a run directory's records.
RunSummary summarize(const traces::LoadedRun &run);

struct RunResult {
  RunEnd end = RunEnd::completed;
  std::filesystem::path dir;
  std::string message;               ///< why it stopped early, when it did
  int turns_recorded = 0;            ///< this session
  int turns_abandoned = 0;           ///< in flight when stopped (not recorded; redone on resume)
  int request_failures = 0;          ///< turns recorded this session that failed for a non-model reason (the
                                     ///< endpoint, not the answer): `ptxbench resume` sends them again
  int retried_request_failures = 0;  ///< resume: turns that had ended in a request failure, sent again
  double orchestrator_cpu_ms =
      0;  ///< this session, the loop's own CPU (record writes included; excluding client, evaluator)
  double client_cpu_ms = 0;  ///< CPU of the chat client calls (HTTP, JSON) on our threads
  double evaluator_cpu_ms =
      0;  ///< in-process CPU of the CPU stages (compilers' own CPU is in child processes)
  double wall_seconds = 0;
  /// Throughput of this session: per GPU, the fraction of the wall time its GPU stage ran; verdicts
  /// made and reused (verdict cache); verdicts per GPU-hour (made + reused over wall x GPUs).
  std::map<int, double> gpu_busy_fraction;
  int verdicts_made = 0, verdicts_reused = 0;
  double verdicts_per_gpu_hour = 0;
  RunSummary summary;
};

class Runner {
 public:
  /// A new run: resolves tasks, creates the run directory, writes run.json.
  static util::Expected<std::unique_ptr<Runner>> start(RunConfig config, RunServices services,
                                                       RunOptions options);
  /// Continues <dir>: finished turns are kept, unfinished trajectories go on from their next turn.
  static util::Expected<std::unique_ptr<Runner>> resume(const std::filesystem::path &dir,
                                                        RunServices services, RunOptions options);
  ~Runner();
  Runner(const Runner &) = delete;
  Runner &operator=(const Runner &) = delete;

  /// Runs to the end (or interruption); blocks.
  RunResult run();
  /// Stops taking new turns; in-flight requests are cancelled, in-flight evaluations finish and are recorded.
  void request_stop(const std::string &why);
  const std::filesystem::path &dir() const;

  /// The runner's state, shared by its source files (detail/runner_state.hpp).
  using Impl = detail::RunnerState;

 private:
  explicit Runner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptxbench::agent
