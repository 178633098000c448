// Per-instruction execution counts through the CUPTI SASS Metrics API
// (smsp__sass_inst_executed, smsp__sass_thread_inst_executed_pred_on). Their
// join with the SASS listing (execution_figures) is in execution_figures.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda.h>
#include <cupti_result.h>
#include <nlohmann/json.hpp>

#include "evaluator/worker/detail/execution_figures.hpp"

namespace ptxbench::worker::detail {

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

/// "CALL failed: CUPTI's text" and, for a permission or support refusal, what to do about it.
std::string cupti_error(const char *call, CUptiResult result);

/// CUPTI version as "major.minor" style number text.
std::string cupti_version();

/// The set-up of count_sass_instructions that patches nothing (profiler initialization, chip name,
/// metric properties), done ahead of any job by a pre-started worker; "" or why it failed. No kernel
/// runs instrumented until count_sass_instructions enables the metrics.
std::string prewarm_cupti(int device_ordinal);

}  // namespace ptxbench::worker::detail
