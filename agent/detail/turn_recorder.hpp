// The turn recorder: what a run writes and reports. It owns run.json's record, the trajectory writer
// (a failed write stops the run, resumably), each turn's typed record and feedback, the session's
// figures (turns, request failures, CPU time, verdicts made and reused, GPU busy time) and the progress
// display with what a resumed run's earlier sessions did.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/detail/progress.hpp"
#include "agent/detail/scheduler.hpp"  // also the plan's

namespace ptxbench::agent::detail {

class TurnRecorder {
 public:
  /// Writes run.json (`run_record`), then opens the trace and the progress display (`previous`: what the
  /// earlier sessions of a resumed run did; zeros for a new run). Error: run.json could not be written.
  static util::Expected<std::unique_ptr<TurnRecorder>> open(const RunPlan &plan, Scheduler &scheduler,
                                                            traces::RunRecord run_record,
                                                            const PreviousCounts &previous);
  TurnRecorder(const TurnRecorder &) = delete;
  TurnRecorder &operator=(const TurnRecorder &) = delete;

  /// run.json as written (on resume: as read, then this session's added).
  const traces::RunRecord &run_record() const { return run_record_; }
  int retried_request_failures() const { return retried_request_failures_; }
  ProgressDisplay &progress() { return progress_; }

  /// The feedback the model gets for a turn that does not stop its trajectory.
  std::string feedback_for(const TurnJob &job, const evaluator::Verdict *verdict) const;
  /// Appends the turn's record and counts it (progress, the session's figures). False: not written (the
  /// run stops, resumable). `started_ns`: the thread's CPU time when the turn's end began.
  bool record(const TurnJob &job, const std::string &stop, const std::string &feedback,
              std::int64_t started_ns);
  /// The loop's own CPU for a turn, after its record was written (the record could not hold it).
  void add_orchestrator_ns(std::int64_t ns) { orchestrator_ns_ += ns; }
  /// An endpoint's error, once per kind of error (digits dropped): every failed turn is in the trace.
  void show_error_once(const std::string &endpoint, const llm::ChatError &error);
  void verdict_made() { ++verdicts_made_; }
  void verdict_reused() { ++verdicts_reused_; }
  void add_gpu_busy(int ordinal, double seconds);
  /// The session's figures into `result` (its wall_seconds set); run.json is rewritten with them.
  void report(RunResult &result);

 private:
  TurnRecorder(const RunPlan &plan, Scheduler &scheduler, traces::RunRecord run_record,
               const PreviousCounts &previous);
  traces::TurnRecord turn_record(const TurnJob &job, const std::string &stop,
                                 const std::string &feedback) const;
  /// Appends the record; on failure stops the run (resumable) and returns false.
  bool append(const traces::TurnRecord &record);

  const RunPlan &plan_;
  Scheduler &scheduler_;  ///< stopped when a write fails
  traces::RunRecord run_record_;
  traces::TrajectoryWriter writer_;
  std::mutex write_mutex_;
  bool write_failed_ = false;  ///< guarded by write_mutex_
  ProgressDisplay progress_;
  std::mutex errors_mutex_;
  std::set<std::string> errors_shown_;  ///< endpoint + error with digits dropped (guarded by errors_mutex_)

  const int retried_request_failures_;    ///< resume: turns that had ended in a request failure, sent again
  std::atomic<int> turns_recorded_{0};    ///< this session
  std::atomic<int> request_failures_{0};  ///< turns this session that failed for a non-model reason
  std::atomic<std::int64_t> orchestrator_ns_{0}, client_ns_{0}, evaluator_ns_{0};  ///< this session's CPU
  std::atomic<int> verdicts_made_{0}, verdicts_reused_{0};
  std::mutex busy_mutex_;
  std::map<int, double> gpu_busy_s_;  ///< GPU ordinal -> seconds its GPU stage ran (guarded by busy_mutex_)
};

}  // namespace ptxbench::agent::detail
