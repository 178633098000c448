// The execution stage's figures: per target of the task whether its SASS is there and ran (CUPTI's per-PC
// counts of one instrumented launch joined with the listing), the work and bytes it did, the busiest opcode
// families, and the multiply-add work outside the targets (protocol::MatrixWork). One codec: the worker
// fills ExecutionFigures and writes it as the execution stage's figures, and every reader (the
// targets-executed axis and its redundant-work rule, the feedback, `ptxbench show`, the service's reward)
// decodes it with `execution_figures_from_figures` / `Verdict::execution_figures()`.
//
// Three forms, by what the stage did:
// - counted (instrumented): {targets: [TargetExecution], workload, instrumented: true, top_opcodes
//   [{family, warp_executions}], tensor_core_share, tensor_core_flops, tensor_core_work_share|null,
//   workload_flops|null, total_warp_instructions, load_bytes {tma, plain, tma_share|null}, matrix_work,
//   functions, records, unmatched_records, dropped_records}
// - not instrumented (decided from the SASS before the launch): {targets, instrumented: false,
//   not_instrumented (why)}; the rows of targets present in the SASS have null counts
// - skipped for its cost (an incorrect kernel): {estimated_seconds}
// TargetExecution: {name, sass_families, present_in_sass, warp_executions|null, threads_on|null, executed,
//   [counted,] work_flops|null, work_share|null, matrix_target[, work_unknown_opcodes][, byte_share|null]}
//
// A field an older record lacks reads as its default below (an older counted record has no `instrumented`
// and reads as instrumented); a key the codec does not know is refused, and errors name the field
// ("targets[1].work_share").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"
#include "evaluator/protocol/matrix_work.hpp"

namespace ptxbench::protocol {

/// One target instruction of the task in the instrumented launch.
struct TargetExecution {
  std::string name;                        ///< the task's target name ("wgmma")
  std::vector<std::string> sass_families;  ///< SASS opcode families that implement it ("HGMMA")
  bool present_in_sass = false;            ///< one of those families is in the compiled SASS
  /// warp-level executions of its families (count); none (null) when present but not counted
  std::optional<std::uint64_t> warp_executions;
  /// thread-level executions with the predicate on (count); none (null) when present but not counted
  std::optional<std::uint64_t> threads_on;
  bool executed = false;  ///< some thread ran it with its predicate on (threads_on > 0)
  /// only in the not-instrumented form: whether its counts are known (true for a target absent from the
  /// SASS: 0 is exact); none (absent) in the counted form
  std::optional<bool> counted;
  /// FLOP: what its executed MMAs did, from the opcode's shape; none (null) without a FLOP meaning (TMA
  /// loads) or a shape in the opcode (tcgen05)
  std::optional<double> work_flops;
  std::optional<double> work_share;  ///< work_flops / the instrumented workload's FLOPs; none likewise
  bool matrix_target = false;        ///< all its families are tensor-core ones (the redundant-work rule)
  /// executed opcodes of its families whose shape is not in the opcode (written only when some are)
  std::vector<std::string> work_unknown_opcodes;
  /// all its families are TMA loads: `byte_share` is written for it (as null when unknown)
  bool tma_load_target = false;
  /// fraction 0..1 of the bytes read from global memory that TMA loads delivered (an upper bound: every
  /// box at the largest size); none without a tensor map or with nothing loaded
  std::optional<double> byte_share;
  PTXBENCH_PROTOCOL_EQUALITY(TargetExecution)
};

/// One SASS opcode family by warp-level executions (most first, at most 12).
struct TopOpcode {
  std::string family;                 ///< SASS opcode family ("FFMA")
  std::uint64_t warp_executions = 0;  ///< count
  PTXBENCH_PROTOCOL_EQUALITY(TopOpcode)
};

/// Bytes read from global memory in the instrumented launch.
struct LoadBytes {
  double tma = 0;    ///< bytes: UTMALDG thread executions x the largest tensor-map box (an upper bound)
  double plain = 0;  ///< bytes: LDG/LDGSTS/LD thread executions x their width
  std::optional<double> tma_share;  ///< tma / (tma + plain); none without a tensor map or any load
  PTXBENCH_PROTOCOL_EQUALITY(LoadBytes)
};

struct ExecutionFigures {
  std::vector<TargetExecution> targets;  ///< in the task's order (every form but the skipped one)
  /// the counted form; false when the kernel was not launched under CUPTI (not_instrumented says why, or
  /// estimated_seconds says what counting would have cost)
  bool instrumented = true;
  std::optional<std::string> not_instrumented;  ///< why not (the not-instrumented form only)
  /// s: the instrumented launch's estimate when the stage was skipped for its cost (the only field then)
  std::optional<double> estimated_seconds;
  // The counts (counted form only).
  std::string workload;                          ///< the instrumented (smallest) workload's name
  std::vector<TopOpcode> top_opcodes;            ///< busiest families, most first
  double tensor_core_share = 0;                  ///< fraction 0..1 of executed warp instructions
  double tensor_core_flops = 0;                  ///< FLOP: what executed MMAs with a known shape did
  std::optional<double> tensor_core_work_share;  ///< tensor_core_flops / workload_flops; none if unknown
  std::optional<double> workload_flops;          ///< FLOP of the instrumented workload; none if unknown
  std::uint64_t total_warp_instructions = 0;     ///< count
  LoadBytes load_bytes;
  std::optional<MatrixWork> matrix_work;  ///< none in older records (absent)
  std::vector<std::string> functions;     ///< the candidate's functions in the listing
  std::uint64_t records = 0;              ///< CUPTI per-PC records read (count)
  std::uint64_t unmatched_records = 0;    ///< records of the candidate's functions at no listed PC (count)
  std::uint64_t dropped_records = 0;      ///< records CUPTI dropped (count)
  PTXBENCH_PROTOCOL_EQUALITY(ExecutionFigures)

  /// The row of target `name`; nullptr when there is none.
  const TargetExecution *target(std::string_view name) const;
};

void to_json(nlohmann::json &j, const TargetExecution &t);
/// Throws ProtocolError naming the field on a row not of that form.
void from_json(const nlohmann::json &j, TargetExecution &t);
void to_json(nlohmann::json &j, const TopOpcode &o);
void from_json(const nlohmann::json &j, TopOpcode &o);
void to_json(nlohmann::json &j, const LoadBytes &b);
void from_json(const nlohmann::json &j, LoadBytes &b);
/// The form follows the struct: estimated_seconds set -> the skipped form; instrumented false -> the
/// not-instrumented form; else the counted one.
void to_json(nlohmann::json &j, const ExecutionFigures &f);
/// Throws ProtocolError naming the field ("targets[0].executed") on figures not of that form.
void from_json(const nlohmann::json &j, ExecutionFigures &f);

/// The execution stage's figures; nullopt when the stage wrote none (skipped before counting: no SASS
/// listing, CUPTI unavailable). Throws ProtocolError naming the field when they are malformed.
std::optional<ExecutionFigures> execution_figures_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
