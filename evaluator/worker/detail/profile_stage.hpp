// The profile stage (profile_stage.cpp): hardware metrics of one launch of a correct kernel through
// CUPTI's range profiler beside the library's, the occupancy and what limits it, and PC sampling of one
// more launch. Runs after every timed launch.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/protocol/profile.hpp"
#include "evaluator/worker/detail/range_profiler.hpp"
#include "evaluator/worker/detail/stage_context.hpp"

namespace ptxbench::worker::detail {

struct PcSamples;  // pc_sampling.hpp

class ProfileStage {
 public:
  explicit ProfileStage(StageContext &ctx) : ctx_(ctx) {}

  /// Hardware metrics of one launch of a correct kernel, beside the library's; skipped when not correct
  /// or when one launch per pass does not fit ProfilePolicy::budget.
  void run(bool correct);

 private:
  /// Records the profile stage as skipped: `passes` replays of a `launch_ms` launch exceed the budget.
  void profile_too_slow(double launch_ms, const std::string &passes, Clock::time_point start);
  /// Passes of the candidate's launch that fit ProfilePolicy::budget; nullopt when not one (or fewer than the
  /// metrics are known to need) fits, with the skipped stage recorded.
  std::optional<int> profile_max_passes(double launch_ms, Clock::time_point start);
  /// Launches of `launch_ms` sampled together (ProfilePolicy::pc_sampling_min_time).
  int sampled_launches(double launch_ms) const;
  /// Selection-cache key of the pass count of the job's metric set on this GPU.
  std::string profile_passes_key() const;
  /// The range profiler's figures of one launch of the candidate (outputs poisoned before each pass).
  RangeMetrics profile_candidate(const JobWorkload &w, TensorSet &tensors, detail::PackedParams &params,
                                 int max_passes);
  /// The library's figures for the workload's shape: from the selection cache, else measured and cached;
  /// nullopt when not measured. `source`: "cached", "measured" or why not.
  std::optional<std::map<std::string, double>> library_figures(const JobWorkload &w, const TensorSet &tensors,
                                                               std::string &source);
  /// sample_launch when the launch and the sampler's set-up fit ProfilePolicy::pc_sampling_budget, else
  /// why not (in `unavailable`).
  protocol::PcSampling pc_sampling_within_budget(const JobWorkload &w, const TensorSet &tensors,
                                                 detail::PackedParams &params,
                                                 const std::map<std::string, double> &measured,
                                                 double launch_ms, json &phase_seconds);
  /// Theoretical occupancy of the workload's launch and its limiter (and resident clusters).
  protocol::Occupancy occupancy(const JobWorkload &w) const;
  /// The library's metrics on the same inputs into `out`; "measured", or why not.
  std::string profile_library(const JobWorkload &w, const TensorSet &inputs,
                              const std::vector<std::string> &names, std::map<std::string, double> &out);
  /// PC sampling of one more launch: the kernel's warp states and its most sampled PCs. `measured` (the
  /// range profiler's figures) sets the sampling period from the launch's duration and clock. The
  /// sampler's steps add their seconds to `phase_seconds` (keys "pc_sampling_<step>").
  protocol::PcSampling sample_launch(const JobWorkload &w, const TensorSet &tensors,
                                     detail::PackedParams &params,
                                     const std::map<std::string, double> &measured, double launch_ms,
                                     json &phase_seconds);
  /// The sampled launches' counts into `out`: samples per stall reason, and the most sampled PCs (at most
  /// kMaxHandedPcs) with theirs.
  static void tally_samples(const detail::PcSamples &samples, protocol::PcSampling &out);

  StageContext &ctx_;
};

}  // namespace ptxbench::worker::detail
