// Where a launch spends its time, per SASS instruction: CUPTI's PC sampling (start/stop control,
// parsed output) samples one warp of every SM at a fixed cycle period and records the PC and why the
// warp was not issuing. The rows are (function, offset within it) like the SASS listing, so the
// orchestrator maps them to the candidate's own PTX or CUDA lines with the cubin's line table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cuda.h>

namespace ptxbench::worker::detail {

/// The samples of one PC.
struct SampledPcRow {
  std::string function;       ///< kernel (function) name as in the cubin
  std::uint32_t offset = 0;   ///< byte offset in the function (SASS listing offset)
  std::uint64_t samples = 0;  ///< samples at this PC, every warp state
  std::map<std::string, std::uint64_t>
      reasons;  ///< warp state -> samples (short names, e.g. "long_scoreboard")
};

struct PcSamples {
  bool available = false;
  std::string reason;                 ///< when !available: CUPTI's refusal or why nothing came back
  std::uint64_t total_samples = 0;    ///< every sample the hardware took in the range (incl. dropped)
  std::uint64_t dropped_samples = 0;  ///< lost to buffer overflow
  int period_log2 = 0;                ///< sampling period: 2^period_log2 SM cycles
  std::vector<SampledPcRow> rows;     ///< PCs with samples, most sampled first
  double seconds = 0;                 ///< s: set-up, the sampled launch and collection
  bool collected = false;             ///< the launch was sampled and its buffers read (samples or none)
  /// s per step (enable, stall_reasons, configure, prepare, sampled_launch, collect), so the cost can be
  /// attributed
  std::map<std::string, double> steps;
};

/// How CUPTI samples: kernel_serialized (each kernel alone, the default: samples belong to one launch) or
/// continuous (concurrent kernels allowed; a fallback when the serialized mode returned no samples at all).
enum class PcSamplingMode { kernel_serialized, continuous };

/// How the sampler is set up (beside the period).
struct SamplerOptions {
  PcSamplingMode mode = PcSamplingMode::kernel_serialized;
  std::size_t hardware_buffer_bytes = 0;  ///< bytes; CUPTI's buffer for the raw samples (0 = CUPTI's default)
  /// ms; how long CUPTI's worker threads (which decode the raw samples and correlate them with the SASS
  /// of newly loaded modules) sleep between rounds (0 = CUPTI's default, 100 ms)
  std::uint32_t worker_sleep_ms = 0;
};

/// Sampling period (log2 of SM cycles) that gives about `target_samples` samples for a launch of
/// `launch_ms` on `sm_count` SMs at `sm_clock_mhz` (each SM takes one sample per period); 5..31.
int pc_sampling_period_log2(double launch_ms, int sm_count, double sm_clock_mhz, double target_samples);

/// Launches to sample together so that they add up to `min_ms` of kernel time: ceil(min_ms / launch_ms),
/// at least 1 and at most `max_launches`.
int pc_sampling_launches(double launch_ms, double min_ms, int max_launches);

/// Samples the PCs of `work` (one launch, completed before it returns); `prepare` runs first, outside
/// the sampled range, after sampling is enabled: CUPTI keeps PC records only for modules loaded after
/// that (the samples of older ones count as non-user kernels' and come without PCs), so `prepare` loads
/// the module `work` launches; a non-empty answer from it is why nothing was sampled. Names of warp states
/// are CUPTI's without the "smsp__pcsamp_warps_issue_stalled_" prefix; "_not_issued" duplicates are left out.
/// `keep_enabled`: when set, the session is handed over there instead of disabled on return (disabled when
/// the last copy goes), so its tear-down can wait until the result is written; no other CUPTI session can
/// start on the context until then.
PcSamples sample_pcs(CUcontext ctx, int period_log2, const std::function<std::string()> &prepare,
                     const std::function<void()> &work, const SamplerOptions &options = {},
                     std::shared_ptr<void> *keep_enabled = nullptr);

/// CUPTI's stall reason name in short form: "smsp__pcsamp_warps_issue_stalled_long_scoreboard" ->
/// "long_scoreboard"; "" for the "_not_issued" variants (counted again under the plain name).
std::string short_stall_reason(const std::string &cupti_name);

}  // namespace ptxbench::worker::detail
