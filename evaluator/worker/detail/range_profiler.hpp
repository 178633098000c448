// Hardware metrics of one piece of GPU work through CUPTI's range profiler (a range per kernel launch, user
// replay): the work is run once per pass the metrics need, its kernels' ranges are combined into one set
// (combine_kernel_ranges), and the metrics are evaluated on the host with
// CUPTI's profiler host API. Metric names are Nsight Compute's, so `ncu --metrics` reads the same.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <cuda.h>

namespace ptxbench::worker::detail {

struct RangeMetrics {
  bool available = false;
  std::string reason;                    ///< when !available: CUPTI's refusal
  std::map<std::string, double> values;  ///< metric name -> value
  std::vector<std::string> unavailable;  ///< names CUPTI did not accept on this GPU
  int passes = 0;                        ///< passes the metrics took
  int kernels = 0;                       ///< kernel launches the work held (ranges combined)
  double setup_seconds = 0;              ///< s: CUPTI set-up before the first pass (config image, enable)
  /// s per set-up step (initialize, counter_availability, host_object, config_image, enable, counter_data),
  /// so the set-up's cost can be attributed
  std::map<std::string, double> setup_steps;
  double passes_seconds = 0;  ///< s: the passes, decoding and evaluation
  /// s per step of the passes, summed over passes (prepare, start, work, stop), then decode and evaluate,
  /// so a pass's cost beyond the kernel's own time can be attributed
  std::map<std::string, double> pass_steps;
};

/// Makes CUPTI's host-side set-up for `metrics` on this context (counter availability, host object, config
/// image) ahead, so the next profile_range with the same metrics skips it; "" or CUPTI's refusal.
/// `made_now` (when given) says whether it was made by this call or already there.
std::string prepare_range_profiler(CUcontext ctx, int device_ordinal, const std::vector<std::string> &metrics,
                                   bool *made_now = nullptr);

/// Collects `metrics` over `work`, run once per pass the metrics need (at most `max_passes`). `prepare`
/// runs before each pass, outside the measured range (e.g. re-poisoning outputs), so every pass starts
/// from the same state. Metrics CUPTI does not know on this chip are left out and listed in `unavailable`.
RangeMetrics profile_range(CUcontext ctx, int device_ordinal, const std::vector<std::string> &metrics,
                           const std::function<void()> &prepare, const std::function<void()> &work,
                           int max_passes = 64);

}  // namespace ptxbench::worker::detail
