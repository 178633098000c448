// The execution stage (execution_stage.cpp): CUPTI SASS counts of one instrumented launch of the
// smallest workload, joined with the SASS listing, for the target-instruction axis and the feedback.
#pragma once

#include <optional>
#include <string>

#include "evaluator/worker/detail/stage_context.hpp"

namespace ptxbench::worker::detail {

class ExecutionStage {
 public:
  explicit ExecutionStage(StageContext &ctx) : ctx_(ctx) {}

  /// Counts (or records why not) and writes the stage; `correct`: the correctness stage's verdict.
  void run(bool correct);

 private:
  // The orchestrator disassembles the cubin while the first stages run; wait for its listing here.
  // "" when it arrived (or was in the job), else why there is none.
  std::string await_sass_listing();
  /// The stage's result when it launches nothing instrumented (detail::plan_instrumentation): no target
  /// in the SASS (the axis is false), counts that would only feed the feedback and pass the budget, or
  /// no SASS listing to join the counts with. nullopt: count.
  std::optional<protocol::StageResult> execution_skipped(bool correct, Clock::time_point start);
  double incorrect_execution_budget_ms() const;  ///< ms

  StageContext &ctx_;
};

}  // namespace ptxbench::worker::detail
