// The profile stage's record: hardware metrics of one candidate launch (CUPTI range profiler, Nsight
// Compute's metric names, so any figure can be checked with `ncu --metrics NAME`), the library's figures
// for the same workload beside them, and the occupancy with its limiter. One codec; the worker writes it
// as the profile stage's figures and every reader decodes it with `kernel_profile_from_json`.
#pragma once

#include <cstdint>
#include <map>
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

/// Samples of one warp state (CUPTI's stall reason, short name: "long_scoreboard", "barrier", "selected").
struct StallCount {
  std::string reason;
  std::uint64_t samples = 0;
  PTXBENCH_PROTOCOL_EQUALITY(StallCount)
};

/// One sampled SASS instruction: (function, offset) as in the SASS listing.
struct SampledPc {
  std::string function;
  std::uint32_t offset = 0;         ///< byte offset in the function
  std::uint64_t samples = 0;        ///< samples at this PC, every warp state
  std::vector<StallCount> reasons;  ///< most samples first
  PTXBENCH_PROTOCOL_EQUALITY(SampledPc)
};

/// One line of the candidate's own source (PTX or CUDA), from the samples of the PCs its line info maps
/// to it.
struct HotLine {
  int line = 0;                      ///< 1-based line of the source the model sent
  std::string text;                  ///< that line, trimmed and cut to a bounded length
  std::uint64_t samples = 0;         ///< samples of its PCs
  double share = 0;                  ///< samples / all samples in the kernel, 0..1
  std::vector<StallCount> reasons;   ///< most samples first, at most 3
  std::vector<std::string> opcodes;  ///< its most sampled SASS opcodes, at most 3
  PTXBENCH_PROTOCOL_EQUALITY(HotLine)
};

/// Where the launch spends its time: CUPTI PC sampling of one launch. `samples == 0`: not measured
/// (`unavailable` says why, "" when it was not attempted).
struct PcSampling {
  std::uint64_t samples = 0;          ///< samples in the kernel's PCs (every PC, not only those kept)
  std::uint64_t dropped_samples = 0;  ///< samples the hardware lost (buffer full)
  int period_log2 = 0;                ///< one sample per SM every 2^period_log2 cycles
  int launches = 1;                   ///< launches sampled together (a kernel of microseconds takes several)
  std::vector<StallCount> reasons;    ///< the whole kernel's warp states, most samples first
  std::vector<SampledPc> pcs;         ///< the most sampled PCs, most first (bounded)
  std::vector<HotLine>
      hot_lines;  ///< the most sampled source lines, most first (bounded; the orchestrator maps them)
  std::string line_source;  ///< "kernel.ptx" / "kernel.cu": what hot_lines' numbers count; "" = not mapped
  std::string line_error;   ///< why the PCs could not be mapped to lines ("" = mapped or not tried)
  std::string unavailable;  ///< why nothing was sampled ("" = sampled, or not attempted)
  PTXBENCH_PROTOCOL_EQUALITY(PcSampling)
};

struct KernelProfile {
  std::string workload;                  ///< the workload profiled (the largest shown one)
  std::vector<ProfileMetric> metrics;    ///< in a fixed order; metrics the GPU does not offer are left out
  std::vector<std::string> unavailable;  ///< metric names CUPTI refused on this GPU
  Occupancy occupancy;
  int passes = 0;              ///< replay passes CUPTI needed for the metrics
  std::string library_source;  ///< "measured" | "cached" | "" (not measured) and why not, if so
  PcSampling pc_sampling;      ///< hot PCs and lines with their warp states (samples == 0: not measured)
  PTXBENCH_PROTOCOL_EQUALITY(KernelProfile)

  const ProfileMetric *find(std::string_view name) const;
  /// The throughput metric closest to its peak: the unit that bounds the kernel. nullptr when none.
  const ProfileMetric *bound_unit() const;
};

void to_json(nlohmann::json &j, const ProfileMetric &m);
void from_json(const nlohmann::json &j, ProfileMetric &m);
void to_json(nlohmann::json &j, const Occupancy &o);
void from_json(const nlohmann::json &j, Occupancy &o);
void to_json(nlohmann::json &j, const StallCount &c);
void from_json(const nlohmann::json &j, StallCount &c);
void to_json(nlohmann::json &j, const SampledPc &pc);
void from_json(const nlohmann::json &j, SampledPc &pc);
void to_json(nlohmann::json &j, const HotLine &l);
void from_json(const nlohmann::json &j, HotLine &l);
void to_json(nlohmann::json &j, const PcSampling &s);
void from_json(const nlohmann::json &j, PcSampling &s);
void to_json(nlohmann::json &j, const KernelProfile &p);
void from_json(const nlohmann::json &j, KernelProfile &p);

/// The profile stage's figures: {kernel_profile?, phase_seconds}.
struct ProfileFigures {
  std::optional<KernelProfile> kernel_profile;  ///< none when the stage measured nothing (skipped)
  /// s per phase: the candidate's and the library's metrics, their CUPTI set-up steps
  /// (candidate_cupti_<step>), PC sampling and its steps (pc_sampling_<step>)
  std::map<std::string, double> phase_seconds;
  PTXBENCH_PROTOCOL_EQUALITY(ProfileFigures)
};
void to_json(nlohmann::json &j, const ProfileFigures &f);
/// Throws ProtocolError naming the field ("kernel_profile.metrics[0].value", "phase_seconds") on figures
/// not of that form; a key it does not know is refused.
void from_json(const nlohmann::json &j, ProfileFigures &f);

/// The profile in a profile stage's figures; nullopt when the stage measured nothing (skipped, or an
/// older verdict without the stage). Throws ProtocolError naming the field when the figures are malformed.
std::optional<KernelProfile> kernel_profile_from_figures(const nlohmann::json &figures);
/// The profile stage's figures; nullopt when it has none (an older verdict, or figures {}).
std::optional<ProfileFigures> profile_figures_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
