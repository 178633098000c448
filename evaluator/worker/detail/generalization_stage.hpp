// The generalization stage (generalization_stage.cpp): the task's hidden workloads, checked with the
// correctness stage's trials and, when the job asks, timed with the timing stage's loop.
#pragma once

#include "evaluator/worker/detail/correctness_stage.hpp"
#include "evaluator/worker/detail/stage_context.hpp"
#include "evaluator/worker/detail/timing_stage.hpp"

namespace ptxbench::worker::detail {

class GeneralizationStage {
 public:
  /// `correctness` and `timing`: the shown workloads' stage objects, whose checks (and the borderline
  /// extra-trial budget spent so far) the hidden workloads share.
  GeneralizationStage(StageContext &ctx, CorrectnessStage &correctness, TimingStage &timing)
      : ctx_(ctx), correctness_(correctness), timing_(timing) {}

  /// Checks every hidden workload (after the shown workloads' stages): skipped when `correct` is false.
  void run(bool correct);

 private:
  StageContext &ctx_;
  CorrectnessStage &correctness_;
  TimingStage &timing_;
};

}  // namespace ptxbench::worker::detail
