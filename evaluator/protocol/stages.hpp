// The stage table: every stage of a verdict, CPU and GPU, in one list. Its order is the verdict's
// status order (the overall status is the first stage that decides it and is neither ok nor skipped);
// its columns say where a stage runs, the worker's running order, and which stages a failure or a
// missing GPU skips. Everything that walks the stages (the evaluator's runner, the verdict codec, the
// job's stage list, the worker, crash charging, feedback, show, reports, bench) reads this table.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace ptxbench::protocol {

enum class Stage {
  parse,
  static_checks,
  compile,
  correctness,
  execution,
  timing,
  sanitizer,
  generalization,
  profile
};

/// Where a stage runs: in the evaluator's process (or its compiler children), in the GPU worker, or
/// on the GPU started by the evaluator itself (the compute-sanitizer rerun).
enum class StageSide { cpu, worker, orchestrator };

struct StageInfo {
  Stage stage;
  std::string_view name;  ///< the verdict's and the worker's key (stages.<name>)
  StageSide side;
  bool decides_status;         ///< in the status order (generalization, sanitizer, profile are beside it)
  bool skipped_after_failure;  ///< skip_from marks it when an earlier stage failed
  bool skipped_without_gpu;    ///< skipped, with the reason, when no GPU stage can run (skip_gpu_stages)
  int worker_rank;  ///< the worker's running order (timing before execution); -1 = not the worker's
};

/// In status order. The worker runs timing before execution, so that no timed launch is CUPTI-patched,
/// and generalization (hidden workloads) last of the checks, so a fault there leaves the shown verdict.
inline constexpr StageInfo kStageTable[] = {
    {Stage::parse, "parse", StageSide::cpu, true, true, false, -1},
    {Stage::static_checks, "static", StageSide::cpu, true, true, false, -1},
    {Stage::compile, "compile", StageSide::cpu, true, true, false, -1},
    {Stage::correctness, "correctness", StageSide::worker, true, true, true, 0},
    {Stage::execution, "execution", StageSide::worker, true, true, true, 2},
    {Stage::timing, "timing", StageSide::worker, true, true, true, 1},
    {Stage::sanitizer, "sanitizer", StageSide::orchestrator, false, true, true, -1},
    {Stage::generalization, "generalization", StageSide::worker, false, false, true, 3},
    {Stage::profile, "profile", StageSide::worker, false, false, false, 4},
};

constexpr const StageInfo &stage_info(Stage s) {
  for (const auto &row : kStageTable)
    if (row.stage == s) return row;
  return kStageTable[0];  // unreachable: every Stage has a row (test_protocol checks)
}
constexpr std::string_view stage_name(Stage s) {
  return stage_info(s).name;
}
constexpr std::optional<Stage> stage_from_name(std::string_view name) {
  for (const auto &row : kStageTable)
    if (row.name == name) return row.stage;
  return std::nullopt;
}

namespace detail {
constexpr std::size_t worker_stage_count() {
  std::size_t n = 0;
  for (const auto &row : kStageTable) n += row.worker_rank >= 0 ? 1 : 0;
  return n;
}
template <class T, class Get>
constexpr std::array<T, worker_stage_count()> worker_stages(Get get) {
  std::array<T, worker_stage_count()> out{};
  for (const auto &row : kStageTable)
    if (row.worker_rank >= 0) out[static_cast<std::size_t>(row.worker_rank)] = get(row);
  return out;
}
}  // namespace detail

/// The worker's stages in its running order.
inline constexpr auto kWorkerStages =
    detail::worker_stages<Stage>([](const StageInfo &row) { return row.stage; });
/// Their names (the job's `stages` and the result file's keys), in the same order.
inline constexpr auto kGpuStageNames =
    detail::worker_stages<const char *>([](const StageInfo &row) { return row.name.data(); });

}  // namespace ptxbench::protocol
