// Multiply-add work of the execution stage's instrumented launch, split by who did it: the task's
// tensor-core targets, other tensor-core instructions (mma.sync's HMMA beside a wgmma target, IMMA, ...),
// and the FMA pipe (FFMA, HFMA2, DFMA). The worker writes it as the execution figures' `matrix_work`; the
// evaluator's targets-executed rule reads it back (a target whose work is repeated outside it does not
// count: a decoy wgmma whose results are thrown away beside a full mma.sync computation), and so do the
// feedback and `ptxbench show`.
//
// matrix_work: {workload_flops, target_flops, target_share, non_target_tensor_flops,
//   non_target_tensor_share, fma_flops, fma_share, families: [{family, unit, flops, share}],
//   unknown_opcodes: [opcode]}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

namespace ptxbench::protocol {

/// One SASS opcode family's multiply-add work outside the task's targets.
struct NonTargetFamilyWork {
  std::string family;  ///< SASS opcode family: HMMA, IMMA, HGMMA (when no target names it), FFMA, HFMA2, ...
  std::string unit;    ///< "tensor" (a tensor-core MMA) | "fma" (a fused multiply-add on the FMA pipe)
  double flops = 0;    ///< FLOPs its executed instructions did (threads with the predicate on)
  double share = 0;    ///< flops / workload_flops; 0 when the workload's FLOPs are unknown
  PTXBENCH_PROTOCOL_EQUALITY(NonTargetFamilyWork)
};

/// Every share is a fraction of the instrumented workload's FLOPs (the task's formula), 0 when those are
/// unknown (workload_flops 0). Shares above 1 are real: a causal kernel computing whole diagonal tiles, a
/// backward recomputing the scores.
struct MatrixWork {
  double workload_flops = 0;  ///< FLOPs of the instrumented workload; 0 = unknown
  double target_flops = 0;    ///< FLOPs of executed MMAs of the families a target names (shape in the opcode)
  double target_share = 0;    ///< target_flops / workload_flops
  /// FLOPs of executed tensor-core MMAs of families no target names (shape in the opcode): mma.sync
  /// (HMMA) beside a wgmma target, IMMA, DMMA, ...
  double non_target_tensor_flops = 0;
  double non_target_tensor_share = 0;  ///< non_target_tensor_flops / workload_flops
  /// FLOPs of fused multiply-adds on the FMA pipe outside the targets: FFMA and DFMA 2 per thread, HFMA2
  /// (two lanes) and FFMA2 4 per thread. A matmul done on the CUDA cores shows here; softmax arithmetic
  /// is a few percent at most.
  double fma_flops = 0;
  double fma_share = 0;                       ///< fma_flops / workload_flops
  std::vector<NonTargetFamilyWork> families;  ///< the families above, most FLOPs first, at most kMaxFamilies
  /// Executed tensor-core opcodes outside the targets whose shape is not in the opcode (tcgen05's UTC*MMA):
  /// their work is not counted
  std::vector<std::string> unknown_opcodes;
  PTXBENCH_PROTOCOL_EQUALITY(MatrixWork)

  static constexpr std::size_t kMaxFamilies = 8;
  static constexpr std::size_t kMaxUnknownOpcodes = 8;
};

/// The rule on multiply-add work repeated beside a tensor-core target (the evaluator's, recorded in every
/// verdict's settings as `redundant_work`). A target's executed instructions are counted, not whether its
/// results reach the outputs: a kernel that computes the matmuls on mma.sync and also runs wgmma on every
/// tile, its results multiplied by 0, executed wgmma doing 100% of the FLOPs. The work outside the
/// targets gives it away: 100% of the FLOPs again. Honest kernels have little of it (softmax and epilogue
/// arithmetic on the FMA pipe, a few percent), and a kernel that puts one of its matmuls on another unit
/// fails the work-share rule first (its target share is about half), so the rule applies only once the
/// targets' own share passes. 0.25 = 1 - min_target_work_share (0.75): the target must do at least 75% of
/// the task's FLOPs that no other unit does again, so one of attention's two matmuls done twice (on the
/// target with its result thrown away, and again on mma.sync: half the FLOPs outside) fails too.
struct RedundantWorkPolicy {
  /// Fraction (0..) of the instrumented workload's FLOPs that multiply-add work outside the targets
  /// (MatrixWork::non_target_tensor_share, plus fma_share with count_fma_pipe) may reach beside an
  /// executed tensor-core target; above it the targets do not count as executed. A large value (e.g.
  /// 100) turns the rule off.
  double max_non_target_share = 0.25;
  /// true: fused multiply-adds on the FMA pipe (FFMA, HFMA2, DFMA) count as work outside the targets, so
  /// a matmul done on the CUDA cores beside a decoy wgmma is caught too
  bool count_fma_pipe = true;
  PTXBENCH_PROTOCOL_EQUALITY(RedundantWorkPolicy)

  /// The share of the workload's FLOPs the rule compares with max_non_target_share.
  double non_target_share(const MatrixWork &w) const {
    return w.non_target_tensor_share + (count_fma_pipe ? w.fma_share : 0.0);
  }
  /// Whether `w` breaks the rule (never when the workload's FLOPs are unknown).
  bool exceeded(const MatrixWork &w) const {
    return w.workload_flops > 0 && non_target_share(w) > max_non_target_share;
  }
};

void to_json(nlohmann::json &j, const RedundantWorkPolicy &p);
/// Throws ProtocolError naming the field on a malformed object.
void from_json(const nlohmann::json &j, RedundantWorkPolicy &p);

void to_json(nlohmann::json &j, const NonTargetFamilyWork &w);
void from_json(const nlohmann::json &j, NonTargetFamilyWork &w);
void to_json(nlohmann::json &j, const MatrixWork &w);
/// Throws ProtocolError naming the field on a malformed object.
void from_json(const nlohmann::json &j, MatrixWork &w);

/// The record in an execution stage's figures; nullopt when there is none (the stage did not count, or
/// an older verdict). Throws ProtocolError naming the field when it is malformed.
std::optional<MatrixWork> matrix_work_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
