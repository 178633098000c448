// The execution stage's figures: per-PC CUPTI counts joined with the SASS
// listing. Pure functions (no CUDA calls), so CPU tests cover them.
//
// Besides "did the target run", tensor-core targets get the FLOPs their
// executed instructions performed, read from the opcode's shape: a kernel that
// runs one wgmma and does the GEMM with FFMA executed the target, but did
// almost none of the work with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/execution.hpp"
#include "evaluator/protocol/matrix_work.hpp"
#include "evaluator/worker/detail/protocol_names.hpp"

namespace ptxbench::worker::detail {

struct PcCount {
  std::string function;
  std::uint32_t offset = 0;
  std::uint64_t warp_executions = 0;  ///< smsp__sass_inst_executed
  std::uint64_t threads_on = 0;       ///< smsp__sass_thread_inst_executed_pred_on
};

/// What one matrix-multiply-accumulate SASS instruction computes.
struct MmaWork {
  double flops_per_op = 0;  ///< FLOPs of one MMA (2·m·n·k; halved for sparse .SP forms)
  int threads_per_op = 0;   ///< threads taking part in one MMA: 128 (warpgroup GMMA) or 32 (warp MMA)
};

/// The work of an MMA opcode from its shape, e.g. "HGMMA.64x256x16.F32.BF16" ->
/// {2·64·256·16, 128}, "HMMA.16816.F32.BF16" -> {2·16·8·16, 32}, "DMMA.8x8x4" -> {2·8·8·4, 32}.
/// nullopt for other opcodes and for MMAs whose shape is not in the opcode (tcgen05 UTC*MMA).
std::optional<MmaWork> mma_work(const std::string &opcode);

/// Bytes one thread reads from global memory with a plain (non-TMA) load opcode: LDG, LDGSTS and generic
/// LD (which may also read shared memory; counted as global, the conservative side for a TMA share).
/// "LDG.E.128" -> 16, "LDGSTS.E.BYPASS.LTC128B.128" -> 16, "LDG.E.64" -> 8, "LDG.E.U16" -> 2,
/// "LDG.E" -> 4; nullopt for other opcodes.
std::optional<int> plain_load_bytes(const std::string &opcode);

/// SASS families of TMA loads global -> shared (each execution moves one box).
bool is_tma_load_family(const std::string &family);

/// FLOPs one thread does with a fused multiply-add on the FMA pipe: "FFMA", "FFMA.FTZ", "DFMA" -> 2,
/// "HFMA2", "HFMA2.MMA", "HFMA2.BF16_V2", "FFMA2" -> 4 (two lanes); nullopt for other opcodes.
std::optional<int> fma_flops_per_thread(const std::string &opcode);

/// Tensor-core (matrix multiply-accumulate) SASS families of every generation: HGMMA, HMMA, IMMA, UTCHMMA...
bool is_tensor_core_family(const std::string &family);

/// A target made only of tensor-core families (wgmma, mma.sync, tcgen05.mma): the redundant-work rule
/// applies to it.
bool is_matrix_target(const TargetSpec &t);

/// Joins counts with the listing: execution figures (targets, top_opcodes,
/// tensor_core_share, tensor_core_flops, tensor_core_work_share,
/// total_warp_instructions, functions, records, unmatched_records).
/// Each target gets work_flops and work_share (work_flops / workload_flops) when
/// all its SASS families are MMAs with the shape in the opcode, else null;
/// workload_flops <= 0 (unknown) leaves every work_share null.
/// `load_bytes` {tma, plain, tma_share}: bytes read by TMA loads (thread-level executions x
/// `tma_box_bytes`, the largest box among the launch's tensor maps, so an upper bound) and by plain
/// global loads (thread-level executions x plain_load_bytes). A target whose families are all TMA
/// loads gets byte_share = load_bytes.tma_share: null when tma_box_bytes <= 0 (no tensor map) or nothing
/// was loaded. Each target row says `matrix_target` (is_matrix_target). `matrix_work`
/// (protocol::MatrixWork): the FLOPs of the targets' MMAs, of tensor-core MMAs no target names (mma.sync
/// beside wgmma) and of FMA-pipe instructions (fma_flops_per_thread), each also as a share of
/// workload_flops, per family.
/// The stage adds `workload` and `dropped_records`.
protocol::ExecutionFigures execution_figures(const std::vector<SassInstruction> &listing,
                                             const std::vector<TargetSpec> &targets,
                                             const std::vector<PcCount> &counts, double workload_flops = 0,
                                             double tma_box_bytes = 0);

/// Whether the execution stage launches the candidate under CUPTI, decided before the GPU is touched.
enum class Instrumentation {
  count,              ///< instrument one launch
  no_target_in_sass,  ///< none of the targets is in the SASS: the axis is false, nothing to count
  /// counting would only feed the repair prompt (the kernel is incorrect, or a target is missing from
  /// the SASS so the axis is already false) and the instrumented launch would pass the budget
  over_feedback_budget,
};
struct InstrumentationPlan {
  Instrumentation decision = Instrumentation::count;
  std::vector<std::string> absent_targets;  ///< targets none of whose SASS families is in the listing
};
/// What counting that only helps the feedback may cost (ms of instrumented launch): for an incorrect
/// kernel, and for a correct one with a target missing from its SASS.
struct FeedbackBudgets {
  double incorrect_ms = 250;
  double partial_targets_ms = 2000;
};
/// `estimated_ms`: the instrumented launch's expected time. A correct kernel whose targets are all in the
/// SASS is always counted: its counts decide the axis.
InstrumentationPlan plan_instrumentation(const std::vector<SassInstruction> &listing,
                                         const std::vector<TargetSpec> &targets, bool correct,
                                         double estimated_ms, const FeedbackBudgets &budgets);

/// The execution figures of a kernel that was not instrumented: each target's row with present_in_sass,
/// 0 executions for the absent ones (exact: what is not in the SASS cannot run) and null counts for the
/// present ones; `instrumented` false and `not_instrumented` saying why.
protocol::ExecutionFigures uncounted_figures(const std::vector<SassInstruction> &listing,
                                             const std::vector<TargetSpec> &targets, const std::string &why);

}  // namespace ptxbench::worker::detail
