// Per-instruction execution counts through the CUPTI SASS Metrics API
// (smsp__sass_inst_executed, smsp__sass_thread_inst_executed_pred_on), and
// their join with the SASS listing into the execution stage's figures.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda.h>
#include <nlohmann/json.hpp>

#include "evaluator/worker/job.hpp"

namespace ptxbench::worker::detail {

struct PcCount {
  std::string function;
  std::uint32_t offset = 0;
  std::uint64_t warp_executions = 0;  ///< smsp__sass_inst_executed
  std::uint64_t threads_on = 0;       ///< smsp__sass_thread_inst_executed_pred_on
};

struct SassCountResult {
  bool available = false;
  std::string reason;  ///< when !available: CUPTI's exact refusal
  std::vector<PcCount> counts;
  std::uint64_t dropped_records = 0;
};

/// Enables SASS metrics on `ctx`, runs `run_once` (which launches and waits), and
/// collects the per-PC counts. Never used around a timed launch.
SassCountResult count_sass_instructions(CUcontext ctx, int device_ordinal,
                                        const std::function<void()> &run_once);

/// Joins counts with the listing: execution figures (targets, top_opcodes,
/// tensor_core_share, total_warp_instructions, functions, unmatched_records).
nlohmann::json execution_figures(const std::vector<SassInstruction> &listing,
                                 const std::vector<TargetSpec> &targets, const std::vector<PcCount> &counts);

/// CUPTI version as "major.minor" style number text.
std::string cupti_version();

}  // namespace ptxbench::worker::detail
