// The runner's private state, shared by its parts: setup (runner_setup.cpp), the request, CPU, GPU
// and explanation loops (runner_loops.cpp), and the turn record (runner_finalize.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/detail/progress.hpp"
#include "agent/detail/queues.hpp"
#include "agent/detail/run_config_types.hpp"
#include "agent/detail/run_plan.hpp"
#include "agent/detail/runner_types.hpp"
#include "agent/detail/scheduler.hpp"
#include "agent/detail/service_client.hpp"
#include "evaluator/verdict_cache.hpp"
#include "llm_clients/chat_client.hpp"
#include "tasks/task.hpp"
#include "traces/record.hpp"
#include "traces/run_record.hpp"

// Declared ahead: held here by pointer or in a std::vector (which needs them complete only where its
// members are used) or returned; the runner's source files include their headers.
namespace ptxbench::agent {
struct Attempt;       // conversation.hpp
class PromptBuilder;  // prompt_builder.hpp
struct RepairSeed;    // repair_selection.hpp
struct RunResult;     // runner.hpp
}  // namespace ptxbench::agent

namespace ptxbench::agent::detail {

/// The runner's state (Runner::Impl).
struct RunnerState {
  RunPlan plan_storage;                ///< written by setup() only
  const RunPlan &plan = plan_storage;  ///< what the rest reads
  Scheduler scheduler{plan_storage};
  traces::RunRecord run_record;  ///< run.json as written (on resume: as read, then this session's added)
  std::unique_ptr<traces::TrajectoryWriter> writer;
  std::mutex write_mutex;
  bool write_failed = false;  ///< guarded by write_mutex

  std::unique_ptr<evaluator::VerdictCache> verdict_cache;  ///< resent identical kernels reuse their verdict
  std::mutex busy_mutex;
  std::map<int, double> gpu_busy_s;  ///< GPU ordinal -> seconds its GPU stage ran (guarded by busy_mutex)
  std::atomic<int> verdicts_made{0}, verdicts_reused{0};

  std::atomic<int> turns_recorded{0};
  std::atomic<std::int64_t> orchestrator_ns{0}, client_ns{0}, evaluator_ns{0};
  std::unique_ptr<detail::ProgressDisplay> progress;
  std::atomic<int> request_failures{0};  ///< turns this session that failed for a non-model reason
  int retried_request_failures = 0;      ///< resume: failed turns sent again
  std::mutex errors_mutex;
  std::set<std::string> errors_shown;  ///< endpoint + error with digits dropped (guarded by errors_mutex)

  // ---- setup (runner_setup.cpp)
  util::Expected<void> setup(const traces::LoadedRun *previous);
  util::Expected<void> write_run_json(const traces::LoadedRun *previous, const nlohmann::json &environment);
  void make_progress(const detail::PreviousCounts &counts);

  // ---- the loops (runner_loops.cpp)
  void request_loop(std::size_t endpoint_index);
  /// The request for one turn, or the turn finalized unsent (endpoint given up, run budget used up).
  void run_turn(std::size_t endpoint_index, TrajectoryState &t);
  /// A failed request: counted against the endpoint (given up after too many in a row) and recorded.
  void request_failed(std::size_t endpoint_index, JobPtr job, const llm::ChatError &error);
  void cpu_loop();
  void gpu_loop(int ordinal);
  /// evaluator.url: the turn's verdict from the service; a service that stays down or answers garbage
  /// stops the run (RunEnd::evaluator_failed; the turn is redone on resume).
  /// `parsed`: the response as parsed for the record (empty when it did not parse).
  void evaluate_remotely(JobPtr job, evaluator::ParsedResponse parsed);
  /// A resent identical kernel: its earlier verdict is recorded (reused_from names the turn) and the
  /// turn finalized, with no compile and no GPU time. False: evaluate it (its key is kept for later).
  /// A cached verdict for the response parsed once as `parsed` (its response moves into the turn on a hit).
  bool reuse_verdict(JobPtr &job, evaluator::ParsedCandidate &parsed,
                     const evaluator::EvaluatorSettings &settings);
  void remember_verdict(const TurnJob &job);
  /// Finalizes the turn, or first asks for an explanation of a verified repair without reasoning.
  void finish_turn(JobPtr job);
  void explain_loop();
  void guarded(const char *stage, const std::function<void()> &body);
  void show_error_once(const std::string &endpoint, const llm::ChatError &error);

  // ---- the turn record (runner_finalize.cpp)
  void finalize(JobPtr job);
  std::string feedback_for(const TurnJob &job, const evaluator::Verdict *verdict) const;
  traces::TurnRecord turn_record(const TurnJob &job, const std::string &stop,
                                 const std::string &feedback) const;
  /// Appends the record; on failure stops the run (resumable) and returns false.
  bool append_record(const traces::TurnRecord &record);

  // ---- the session (runner.cpp)
  void start_threads(std::vector<std::thread> &threads);
  void supervise();
  RunResult result_of(double wall_seconds);
};

}  // namespace ptxbench::agent::detail
