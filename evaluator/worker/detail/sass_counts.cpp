#include "evaluator/worker/detail/sass_counts.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

namespace ptxbench::worker::detail {
namespace {

std::string cupti_error(const char *call, CUptiResult r) {
  const char *text = nullptr;
  cuptiGetResultString(r, &text);
  std::string why = std::string(call) + " failed: " + (text ? text : "unknown CUPTI error");
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    why += " (profiling needs permission: run as root or set NVreg_RestrictProfilingToAdminUsers=0)";
  else if (r == CUPTI_ERROR_NOT_SUPPORTED || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED)
    why += " (this GPU or its virtualization does not support SASS metrics)";
  return why;
}

// Tensor-core opcode families (matrix multiply-accumulate units) across generations.
const std::set<std::string> kTensorCoreFamilies = {"HGMMA",   "QGMMA",   "IGMMA",   "BGMMA",   "HMMA",
                                                   "IMMA",    "DMMA",    "BMMA",    "QMMA",    "OMMA",
                                                   "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA"};

}  // namespace

std::string cupti_version() {
  std::uint32_t v = 0;
  if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return "";
  return std::to_string(v);
}

SassCountResult count_sass_instructions(CUcontext ctx, int device_ordinal,
                                        const std::function<void()> &run_once) {
  SassCountResult out;
  CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  if (CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_SUCCESS) {
    out.reason = cupti_error("cuptiProfilerInitialize", r);
    return out;
  }
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<std::size_t>(device_ordinal);
  if (CUptiResult r = cuptiDeviceGetChipName(&chip); r != CUPTI_SUCCESS) {
    out.reason = cupti_error("cuptiDeviceGetChipName", r);
    return out;
  }
  const char *names[2] = {"smsp__sass_inst_executed", "smsp__sass_thread_inst_executed_pred_on"};
  std::uint64_t ids[2] = {0, 0};
  std::vector<CUpti_SassMetrics_Config> configs;
  for (int i = 0; i < 2; ++i) {
    CUpti_SassMetrics_GetProperties_Params props = {CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
    props.pChipName = chip.pChipName;
    props.pMetricName = names[i];
    if (CUptiResult r = cuptiSassMetricsGetProperties(&props); r != CUPTI_SUCCESS) {
      out.reason =
          cupti_error("cuptiSassMetricsGetProperties", r) + " for " + names[i] + " on " + chip.pChipName;
      return out;
    }
    ids[i] = props.metric.metricId;
    configs.push_back({props.metric.metricId, CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU});
  }
  CUpti_SassMetricsSetConfig_Params set = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
  set.numOfMetricConfig = configs.size();
  set.pConfigs = configs.data();
  set.deviceIndex = static_cast<std::uint32_t>(device_ordinal);
  if (CUptiResult r = cuptiSassMetricsSetConfig(&set); r != CUPTI_SUCCESS) {
    out.reason = cupti_error("cuptiSassMetricsSetConfig", r);
    return out;
  }
  CUpti_SassMetricsUnsetConfig_Params unset = {CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
  unset.deviceIndex = set.deviceIndex;
  CUpti_SassMetricsEnable_Params enable = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
  enable.ctx = ctx;
  enable.enableLazyPatching = 1;  // patch only what runs inside the range: the candidate
  if (CUptiResult r = cuptiSassMetricsEnable(&enable); r != CUPTI_SUCCESS) {
    out.reason = cupti_error("cuptiSassMetricsEnable", r);
    cuptiSassMetricsUnsetConfig(&unset);
    return out;
  }
  CUpti_SassMetricsDisable_Params disable = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
  disable.ctx = ctx;
  try {
    run_once();
  } catch (...) {
    cuptiSassMetricsDisable(&disable);
    cuptiSassMetricsUnsetConfig(&unset);
    throw;
  }
  CUpti_SassMetricsGetDataProperties_Params dp = {CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
  dp.ctx = ctx;
  if (CUptiResult r = cuptiSassMetricsGetDataProperties(&dp); r != CUPTI_SUCCESS) {
    out.reason = cupti_error("cuptiSassMetricsGetDataProperties", r);
    cuptiSassMetricsDisable(&disable);
    cuptiSassMetricsUnsetConfig(&unset);
    return out;
  }
  if (dp.numOfPatchedInstructionRecords > 0) {
    // Room for every metric's instances in every record (zeroed: unused entries add nothing).
    const std::size_t per_record = std::max<std::size_t>(1, dp.numOfInstances) * configs.size();
    std::vector<CUpti_SassMetrics_InstanceValue> values(dp.numOfPatchedInstructionRecords * per_record,
                                                        CUpti_SassMetrics_InstanceValue{0, 0});
    std::vector<CUpti_SassMetrics_Data> records(dp.numOfPatchedInstructionRecords);
    for (std::size_t i = 0; i < records.size(); ++i) {
      records[i] = CUpti_SassMetrics_Data{};
      records[i].structSize = sizeof(CUpti_SassMetrics_Data);
      records[i].pInstanceValues = values.data() + i * per_record;
    }
    CUpti_SassMetricsFlushData_Params flush = {CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
    flush.ctx = ctx;
    flush.numOfPatchedInstructionRecords = dp.numOfPatchedInstructionRecords;
    flush.numOfInstances = dp.numOfInstances;
    flush.pMetricsData = records.data();
    if (CUptiResult r = cuptiSassMetricsFlushData(&flush); r != CUPTI_SUCCESS) {
      out.reason = cupti_error("cuptiSassMetricsFlushData", r);
      cuptiSassMetricsDisable(&disable);
      cuptiSassMetricsUnsetConfig(&unset);
      return out;
    }
    for (std::size_t i = 0; i < records.size(); ++i) {
      PcCount c;
      c.function = records[i].functionName ? records[i].functionName : "";
      c.offset = records[i].pcOffset;
      for (std::size_t v = 0; v < per_record; ++v) {
        const auto &iv = records[i].pInstanceValues[v];
        if (iv.metricId == ids[0] && iv.metricId != 0) c.warp_executions += iv.value;
        if (iv.metricId == ids[1] && iv.metricId != 0) c.threads_on += iv.value;
      }
      out.counts.push_back(std::move(c));
    }
  }
  cuptiSassMetricsDisable(&disable);
  out.dropped_records = disable.numOfDroppedRecords;
  cuptiSassMetricsUnsetConfig(&unset);
  out.available = true;
  return out;
}

nlohmann::json execution_figures(const std::vector<SassInstruction> &listing,
                                 const std::vector<TargetSpec> &targets, const std::vector<PcCount> &counts) {
  using nlohmann::json;
  std::map<std::pair<std::string, std::uint32_t>, const SassInstruction *> by_pc;
  std::set<std::string> functions;
  for (const auto &i : listing) {
    by_pc[{i.function, i.offset}] = &i;
    functions.insert(i.function);
  }
  std::map<std::string, std::uint64_t> family_warps, family_threads;
  std::uint64_t total = 0, tensor = 0, unmatched = 0;
  for (const auto &c : counts) {
    if (!functions.count(c.function)) continue;  // not the candidate's code
    auto it = by_pc.find({c.function, c.offset});
    if (it == by_pc.end()) {
      ++unmatched;
      continue;
    }
    const std::string &fam = it->second->family;
    family_warps[fam] += c.warp_executions;
    family_threads[fam] += c.threads_on;
    total += c.warp_executions;
    if (kTensorCoreFamilies.count(fam)) tensor += c.warp_executions;
  }
  std::map<std::string, std::uint64_t> static_count;
  for (const auto &i : listing) ++static_count[i.family];

  json target_list = json::array();
  for (const auto &t : targets) {
    bool present = false;
    std::uint64_t warps = 0, threads = 0;
    for (const auto &f : t.sass_families) {
      present = present || static_count.count(f);
      if (family_warps.count(f)) warps += family_warps[f];
      if (family_threads.count(f)) threads += family_threads[f];
    }
    target_list.push_back({{"name", t.name},
                           {"sass_families", t.sass_families},
                           {"present_in_sass", present},
                           {"warp_executions", warps},
                           {"threads_on", threads},
                           // Executed = some thread had its predicate on: ptxas often turns a short
                           // dead branch into a predicated instruction that warps issue but never run.
                           {"executed", threads > 0}});
  }
  std::vector<std::pair<std::string, std::uint64_t>> top(family_warps.begin(), family_warps.end());
  std::sort(top.begin(), top.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  json top_list = json::array();
  for (std::size_t i = 0; i < top.size() && i < 12; ++i)
    top_list.push_back({{"family", top[i].first}, {"warp_executions", top[i].second}});
  return json{{"targets", target_list},
              {"top_opcodes", top_list},
              {"tensor_core_share", total ? static_cast<double>(tensor) / static_cast<double>(total) : 0.0},
              {"total_warp_instructions", total},
              {"functions", std::vector<std::string>(functions.begin(), functions.end())},
              {"records", counts.size()},
              {"unmatched_records", unmatched}};
}

}  // namespace ptxbench::worker::detail
