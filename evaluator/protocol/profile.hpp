// The profile stage's record: hardware metrics of one candidate launch (CUPTI range profiler, Nsight
// Compute's metric names, so any figure can be checked with `ncu --metrics NAME`), the library's figures
// for the same workload beside them, and the occupancy with its limiter. One codec; the worker writes it
// as the profile stage's figures and every reader decodes it with `kernel_profile_from_json`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

namespace ptxbench::protocol {

/// One hardware metric of the profiled launch.
struct ProfileMetric {
  std::string name;   ///< Nsight Compute / CUPTI metric name, e.g. dram__bytes.sum
  std::string label;  ///< what it is, in words ("DRAM throughput")
  std::string unit;   ///< "%", "ns", "byte", "Hz"
  double value = 0;   ///< the candidate's figure, in `unit`
  std::optional<double>
      library;  ///< the library's figure for the same workload, in `unit`; none if not measured
  /// true: a share of a unit's peak (a "%" throughput), a candidate for the unit that bounds the kernel
  bool throughput = false;
  PTXBENCH_PROTOCOL_EQUALITY(ProfileMetric)
};

/// Theoretical occupancy from the launch and the kernel's resources, and what limits it.
struct Occupancy {
  int block_threads = 0;          ///< threads per block
  int registers_per_thread = 0;   ///< registers per thread
  std::int64_t shared_bytes = 0;  ///< bytes of shared memory per block (static + dynamic)
  int blocks_per_sm = 0;          ///< resident blocks per SM the driver reports (cuOccupancy*)
  int warps_per_sm = 0;           ///< resident warps per SM at that block count
  int max_warps_per_sm = 0;       ///< the SM's warp slots
  double theoretical_pct = 0;     ///< % of the SM's warp slots: warps_per_sm / max_warps_per_sm
  std::string limiter;            ///< "registers" | "shared memory" | "warps" | "block slots" | "cluster"
  int cluster_size = 1;           ///< CTAs per cluster
  std::optional<int> active_clusters;  ///< clusters resident on the whole GPU at once (cluster launches)
  int grid_blocks = 0;                 ///< blocks in the grid
  int sm_count = 0;                    ///< SMs of the GPU
  PTXBENCH_PROTOCOL_EQUALITY(Occupancy)
};

struct KernelProfile {
  std::string workload;                  ///< the workload profiled (the largest shown one)
  std::vector<ProfileMetric> metrics;    ///< in a fixed order; metrics the GPU does not offer are left out
  std::vector<std::string> unavailable;  ///< metric names CUPTI refused on this GPU
  Occupancy occupancy;
  int passes = 0;              ///< replay passes CUPTI needed for the metrics
  std::string library_source;  ///< "measured" | "cached" | "" (not measured) and why not, if so
  PTXBENCH_PROTOCOL_EQUALITY(KernelProfile)

  const ProfileMetric *find(std::string_view name) const;
  /// The throughput metric closest to its peak: the unit that bounds the kernel. nullptr when none.
  const ProfileMetric *bound_unit() const;
};

void to_json(nlohmann::json &j, const ProfileMetric &m);
void from_json(const nlohmann::json &j, ProfileMetric &m);
void to_json(nlohmann::json &j, const Occupancy &o);
void from_json(const nlohmann::json &j, Occupancy &o);
void to_json(nlohmann::json &j, const KernelProfile &p);
void from_json(const nlohmann::json &j, KernelProfile &p);

/// The profile in a profile stage's figures; nullopt when the stage measured nothing (skipped, or an
/// older verdict without the stage). Throws ProtocolError naming the field when the figures are malformed.
std::optional<KernelProfile> kernel_profile_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
