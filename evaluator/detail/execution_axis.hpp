// The targets_executed axis, decided from the execution stage's figures (the
// worker measures, the evaluator judges): every target executed, every
// target whose work has a FLOP count did at least the required share of it,
// and that work is not repeated outside the targets.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/detail/axes.hpp"
#include "evaluator/protocol/matrix_work.hpp"
#include "evaluator/protocol/result.hpp"

#include "evaluator/protocol/verdict.hpp"

namespace ptxbench::evaluator {
using protocol::Generalization;
using protocol::Verdict;
}  // namespace ptxbench::evaluator

namespace ptxbench::evaluator::detail {

struct TargetsExecutedAxis {
  std::optional<bool> value;            ///< nullopt = not measured (stage not ok, or no targets)
  std::vector<std::string> shortfalls;  ///< one sentence per target that ran but did too little of the work
};

/// `min_work_share`: fraction (0..1) of the workload's FLOPs a target with a
/// work_share figure must do (EvaluatorSettings::min_target_work_share).
/// `min_byte_share`: fraction (0..1) of the global-memory bytes a target with a byte_share figure (TMA
/// loads) must deliver (EvaluatorSettings::min_tma_byte_share).
/// `redundant_work`: how much multiply-add work outside the targets may run beside an executed
/// tensor-core target (EvaluatorSettings::redundant_work; the rule is redundant_work_shortfall in
/// evaluator/target_work.hpp).
TargetsExecutedAxis targets_executed_axis(const protocol::StageResult &execution, bool task_has_targets,
                                          double min_work_share, double min_byte_share = 0,
                                          const protocol::RedundantWorkPolicy &redundant_work = {});

/// The three axes, decided in one place from a verdict's GPU stages: correct from the correctness
/// status (nullopt when it was skipped), targets executed from targets_executed_axis, speedup from the
/// timing stage's geomean_speedup (nullopt unless timing is ok). `shortfalls` as in TargetsExecutedAxis.
struct AxesDecision {
  Axes axes;
  std::vector<std::string> shortfalls;
};
AxesDecision decide_axes(const Verdict &verdict, bool task_has_targets, double min_work_share,
                         double min_byte_share, const protocol::RedundantWorkPolicy &redundant_work = {});

/// The `generalizes` result from the generalization stage (the worker's check of the hidden workloads)
/// and the hidden workloads whose launch the manifest could not resolve (`plan_errors`, name -> why):
/// nullopt when the task has no hidden workloads (`hidden_workloads` = how many it has); value nullopt
/// with a reason when they were not checked (switched off, or the kernel was not correct on the shown
/// workloads); else passed of total, each failure with its kind, the first mismatch.
std::optional<Generalization> decide_generalization(const Verdict &verdict, std::size_t hidden_workloads,
                                                    const std::map<std::string, std::string> &plan_errors,
                                                    bool check);

}  // namespace ptxbench::evaluator::detail
