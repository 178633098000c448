// The profile stage's metrics: Nsight Compute's names (so `ncu --metrics NAME` checks any figure), what
// each is in words, its unit, whether it is a share of a unit's peak (a candidate for the unit that
// bounds the kernel) and whether only the full set measures it. Metrics a chip does not offer are left out
// at run time.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "evaluator/protocol/policies.hpp"
#include "evaluator/protocol/profile.hpp"

namespace ptxbench::worker::detail {

struct MetricInfo {
  const char *name;
  const char *label;
  const char *unit;
  bool throughput;
  bool full_only = false;  ///< measured only with ProfileMetricSet::full (its counters cost extra passes)
};

inline const std::vector<MetricInfo> &profile_metric_catalog() {
  static const std::vector<MetricInfo> catalog = {
      {"gpu__time_duration.sum", "duration under the profiler", "ns", false},
      {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput", "%", true, true},
      {"sm__inst_issued.avg.pct_of_peak_sustained_active", "issue slots busy", "%", true},
      {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe", "%", true},
      {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "FMA pipe", "%", true},
      {"sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", "ALU pipe", "%", true},
      {"sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", "load/store pipe", "%", true},
      {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "memory throughput", "%", true,
       true},
      {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput", "%", true},
      {"dram__bytes.sum", "DRAM bytes", "byte", false},
      {"lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput", "%", true},
      {"lts__t_sector_hit_rate.pct", "L2 hit rate", "%", false},
      {"l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/shared throughput", "%", true},
      {"sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy", "%", false},
      {"sm__cycles_elapsed.avg.per_second", "SM clock", "Hz", false},
  };
  return catalog;
}

/// The names of the set's metrics, in catalog order.
inline std::vector<std::string> profile_metric_names(protocol::ProfileMetricSet set) {
  std::vector<std::string> names;
  for (const auto &m : profile_metric_catalog())
    if (set == protocol::ProfileMetricSet::full || !m.full_only) names.emplace_back(m.name);
  return names;
}

/// The catalog's metrics with the candidate's values (and the library's, where given), in catalog
/// order; metrics without a candidate value are left out.
inline std::vector<protocol::ProfileMetric> profile_metrics(const std::map<std::string, double> &candidate,
                                                            const std::map<std::string, double> *library) {
  std::vector<protocol::ProfileMetric> out;
  for (const auto &m : profile_metric_catalog()) {
    const auto it = candidate.find(m.name);
    if (it == candidate.end()) continue;
    protocol::ProfileMetric pm{m.name, m.label, m.unit, it->second, std::nullopt, m.throughput};
    if (library)
      if (const auto lib = library->find(m.name); lib != library->end()) pm.library = lib->second;
    out.push_back(std::move(pm));
  }
  return out;
}

}  // namespace ptxbench::worker::detail
