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

namespace {

constexpr const char *kSassMetricNames[2] = {"smsp__sass_inst_executed",
                                             "smsp__sass_thread_inst_executed_pred_on"};

/// The SASS metrics configured on a device and enabled on a context; disabled and unconfigured on every path.
class SassMetricsSession {
 public:
  SassMetricsSession(CUcontext ctx, int device_ordinal)
      : ctx_(ctx), device_(static_cast<std::uint32_t>(device_ordinal)) {}
  ~SassMetricsSession() {
    disable();
    if (!configured_) return;
    CUpti_SassMetricsUnsetConfig_Params unset = {CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
    unset.deviceIndex = device_;
    cuptiSassMetricsUnsetConfig(&unset);
  }
  /// Configures both metrics (ids into `ids`) and enables them; "" or CUPTI's refusal.
  std::string start(std::uint64_t (&ids)[2]) {
    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    if (CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_SUCCESS)
      return cupti_error("cuptiProfilerInitialize", r);
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = device_;
    if (CUptiResult r = cuptiDeviceGetChipName(&chip); r != CUPTI_SUCCESS)
      return cupti_error("cuptiDeviceGetChipName", r);
    for (int i = 0; i < 2; ++i) {
      CUpti_SassMetrics_GetProperties_Params props = {CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
      props.pChipName = chip.pChipName;
      props.pMetricName = kSassMetricNames[i];
      if (CUptiResult r = cuptiSassMetricsGetProperties(&props); r != CUPTI_SUCCESS)
        return cupti_error("cuptiSassMetricsGetProperties", r) + " for " + kSassMetricNames[i] + " on " +
               chip.pChipName;
      ids[i] = props.metric.metricId;
      configs_.push_back({props.metric.metricId, CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU});
    }
    CUpti_SassMetricsSetConfig_Params set = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
    set.numOfMetricConfig = configs_.size();
    set.pConfigs = configs_.data();
    set.deviceIndex = device_;
    if (CUptiResult r = cuptiSassMetricsSetConfig(&set); r != CUPTI_SUCCESS)
      return cupti_error("cuptiSassMetricsSetConfig", r);
    configured_ = true;
    CUpti_SassMetricsEnable_Params enable = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
    enable.ctx = ctx_;
    enable.enableLazyPatching = 1;  // patch only what runs inside the range: the candidate
    if (CUptiResult r = cuptiSassMetricsEnable(&enable); r != CUPTI_SUCCESS)
      return cupti_error("cuptiSassMetricsEnable", r);
    enabled_ = true;
    return "";
  }
  /// Disables the metrics on the context; the records dropped meanwhile.
  std::uint64_t disable() {
    if (!enabled_) return 0;
    enabled_ = false;
    CUpti_SassMetricsDisable_Params p = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
    p.ctx = ctx_;
    cuptiSassMetricsDisable(&p);
    return p.numOfDroppedRecords;
  }
  std::size_t metric_count() const { return configs_.size(); }

 private:
  CUcontext ctx_;
  std::uint32_t device_;
  std::vector<CUpti_SassMetrics_Config> configs_;
  bool configured_ = false, enabled_ = false;
};

/// Every patched instruction's counts (warp executions, threads with the predicate on); "" or CUPTI's
/// refusal.
std::string flush_counts(CUcontext ctx, std::size_t metric_count, const std::uint64_t (&ids)[2],
                         std::vector<PcCount> &counts) {
  CUpti_SassMetricsGetDataProperties_Params dp = {CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
  dp.ctx = ctx;
  if (CUptiResult r = cuptiSassMetricsGetDataProperties(&dp); r != CUPTI_SUCCESS)
    return cupti_error("cuptiSassMetricsGetDataProperties", r);
  if (dp.numOfPatchedInstructionRecords == 0) return "";
  // Room for every metric's instances in every record (zeroed: unused entries add nothing).
  const std::size_t per_record = std::max<std::size_t>(1, dp.numOfInstances) * metric_count;
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
  if (CUptiResult r = cuptiSassMetricsFlushData(&flush); r != CUPTI_SUCCESS)
    return cupti_error("cuptiSassMetricsFlushData", r);
  for (const auto &record : records) {
    PcCount c;
    c.function = record.functionName ? record.functionName : "";
    c.offset = record.pcOffset;
    for (std::size_t v = 0; v < per_record; ++v) {
      const auto &iv = record.pInstanceValues[v];
      if (iv.metricId == ids[0] && iv.metricId != 0) c.warp_executions += iv.value;
      if (iv.metricId == ids[1] && iv.metricId != 0) c.threads_on += iv.value;
    }
    counts.push_back(std::move(c));
  }
  return "";
}

}  // namespace

SassCountResult count_sass_instructions(CUcontext ctx, int device_ordinal,
                                        const std::function<void()> &run_once) {
  SassCountResult out;
  std::uint64_t ids[2] = {0, 0};
  SassMetricsSession session(ctx, device_ordinal);
  if (std::string why = session.start(ids); !why.empty()) {
    out.reason = why;
    return out;
  }
  run_once();  // an exception leaves through the session's destructor, which disables and unconfigures
  if (std::string why = flush_counts(ctx, session.metric_count(), ids, out.counts); !why.empty()) {
    out.reason = why;
    out.counts.clear();
    return out;
  }
  out.dropped_records = session.disable();
  out.available = true;
  return out;
}

}  // namespace ptxbench::worker::detail
