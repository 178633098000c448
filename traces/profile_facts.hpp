// What the profile stage measured for one attempt, as reports and exports carry it: the unit that bounds
// the kernel and the tensor pipe's share of its peak, beside the library's figure. Read from the verdict's
// profile stage through the protocol's one codec (protocol::kernel_profile_from_figures), never by key.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "traces/record.hpp"

namespace ptxbench::traces {

/// The tensor pipe's share of its peak (the HMMA/HGMMA pipes), as Nsight Compute names the metric.
inline constexpr std::string_view kTensorPipeMetric =
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";

/// One attempt's profile figures. `profiled` is false when the attempt carries no profile (no verdict, no
/// GPU, the stage off or skipped, a verdict made before the stage existed, or a record the codec refused:
/// `error` says why then); such an attempt is "not profiled", never a 0%.
struct AttemptProfile {
  bool profiled = false;
  std::string error;                  ///< the codec's refusal of a malformed record ("" = none)
  std::string bound_unit;             ///< metric name of the throughput closest to its peak; "" = none
  std::string bound_label;            ///< that metric in words ("tensor pipe")
  std::optional<double> bound_value;  ///< its % of peak
  std::optional<double> tensor_pct;   ///< kTensorPipeMetric, % of peak; nullopt when the GPU did not offer it
  std::optional<double> library_tensor_pct;  ///< the library's figure for it; nullopt when not measured
};

AttemptProfile attempt_profile_of(const TurnRecord &record);

}  // namespace ptxbench::traces
