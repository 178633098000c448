#include "evaluator/worker/detail/sass_counts.hpp"

#include <algorithm>

#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

namespace ptxbench::worker::detail {

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

std::string cupti_version() {
  std::uint32_t v = 0;
  if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return "";
  return std::to_string(v);
}

std::string prewarm_cupti(int device_ordinal) {
  CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  if (CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_SUCCESS)
    return cupti_error("cuptiProfilerInitialize", r);
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<std::size_t>(device_ordinal);
  if (CUptiResult r = cuptiDeviceGetChipName(&chip); r != CUPTI_SUCCESS)
    return cupti_error("cuptiDeviceGetChipName", r);
  for (const char *name : {"smsp__sass_inst_executed", "smsp__sass_thread_inst_executed_pred_on"}) {
    CUpti_SassMetrics_GetProperties_Params props = {CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
    props.pChipName = chip.pChipName;
    props.pMetricName = name;
    if (CUptiResult r = cuptiSassMetricsGetProperties(&props); r != CUPTI_SUCCESS)
      return cupti_error("cuptiSassMetricsGetProperties", r);
  }
  return "";
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

}  // namespace ptxbench::worker::detail
