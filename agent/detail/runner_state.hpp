// The runner (Runner::Impl): its plan, scheduler and turn recorder, and the code that joins them: setup
// (runner_setup.cpp), the request, CPU, GPU and explanation loops with each turn's end (runner_loops.cpp),
// and the session (runner.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "agent/detail/run_plan.hpp"
#include "agent/detail/scheduler.hpp"
#include "agent/detail/turn_recorder.hpp"
#include "evaluator/verdict_cache.hpp"

namespace ptxbench::agent {
struct RunResult;  // runner.hpp; made by result_of()
}  // namespace ptxbench::agent

namespace ptxbench::agent::detail {

struct RunnerState {
  RunPlan plan_storage;                ///< written by setup() only
  const RunPlan &plan = plan_storage;  ///< what everything after setup reads
  Scheduler scheduler{plan_storage};
  std::unique_ptr<TurnRecorder> recorder;                  ///< made by setup(), with run.json
  std::unique_ptr<evaluator::VerdictCache> verdict_cache;  ///< resent identical kernels reuse their verdict

  // ---- setup (runner_setup.cpp)
  /// The plan, the trajectories (`previous`: a resumed run's records, rebuilt into them), run.json, the
  /// trace and progress display, the verdict cache.
  util::Expected<void> setup(const traces::LoadedRun *previous);

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
  /// The turn's end: its stop reason (scheduler), feedback and record (recorder), then its trajectory
  /// goes on or ends (scheduler).
  void finalize(JobPtr job);

  // ---- the session (runner.cpp)
  void start_threads(std::vector<std::thread> &threads);
  void supervise();
  RunResult result_of(double wall_seconds);
};

}  // namespace ptxbench::agent::detail
