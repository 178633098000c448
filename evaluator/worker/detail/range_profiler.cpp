#include "evaluator/worker/detail/range_profiler.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include "evaluator/worker/detail/range_combine.hpp"
#include "evaluator/worker/detail/sass_counts.hpp"

namespace ptxbench::worker::detail {
namespace {

/// Kernel launches one piece of profiled work may hold (a library call launches a few).
constexpr std::size_t kMaxKernelRanges = 32;

/// The host object (metric configuration and evaluation), deinitialized on every path.
class HostObject {
 public:
  ~HostObject() {
    if (!object_) return;
    CUpti_Profiler_Host_Deinitialize_Params p = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    p.pHostObject = object_;
    cuptiProfilerHostDeinitialize(&p);
  }
  CUptiResult init(const char *chip, const std::vector<std::uint8_t> &availability) {
    CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip;
    p.pCounterAvailabilityImage = availability.data();
    const CUptiResult r = cuptiProfilerHostInitialize(&p);
    object_ = p.pHostObject;
    return r;
  }
  CUpti_Profiler_Host_Object *get() const { return object_; }

 private:
  CUpti_Profiler_Host_Object *object_ = nullptr;
};

/// The range profiler on a context, disabled on every path.
class TargetObject {
 public:
  ~TargetObject() {
    if (!object_) return;
    CUpti_RangeProfiler_Disable_Params p = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = object_;
    cuptiRangeProfilerDisable(&p);
  }
  CUptiResult enable(CUcontext ctx) {
    CUpti_RangeProfiler_Enable_Params p = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    p.ctx = ctx;
    const CUptiResult r = cuptiRangeProfilerEnable(&p);
    object_ = p.pRangeProfilerObject;
    return r;
  }
  CUpti_RangeProfiler_Object *get() const { return object_; }

 private:
  CUpti_RangeProfiler_Object *object_ = nullptr;
};

/// CUPTI's host-side set-up for one metric list on one device: chip, counter availability, host object,
/// config image and its pass count. It depends only on the device and the metrics, so a process makes it
/// once (a pre-started worker while it waits for its job) and every profiled range reuses it.
struct HostConfig {
  int device_ordinal = -1;
  CUcontext ctx = nullptr;
  std::vector<std::string> requested;
  std::string reason;  ///< non-empty: CUPTI refused the set-up (the call and its error)
  std::vector<std::uint8_t> availability;
  HostObject host;
  std::vector<std::string> accepted_names;
  std::vector<const char *> accepted;  ///< pointers into accepted_names
  std::vector<std::string> unavailable;
  std::vector<std::uint8_t> config;
  int passes = 0;
  std::map<std::string, double> steps;  ///< s per set-up step
};

std::unique_ptr<HostConfig> &host_config_slot() {
  static std::unique_ptr<HostConfig> slot;
  return slot;
}

void build_host_config(HostConfig &hc) {
  auto step_start = std::chrono::steady_clock::now();
  const auto step = [&](const char *name) {
    const auto now = std::chrono::steady_clock::now();
    hc.steps[name] = std::chrono::duration<double>(now - step_start).count();
    step_start = now;
  };
  const auto refuse = [&](const char *call, CUptiResult r) { hc.reason = cupti_error(call, r); };
  CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  if (CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerInitialize", r);
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<std::size_t>(hc.device_ordinal);
  if (CUptiResult r = cuptiDeviceGetChipName(&chip); r != CUPTI_SUCCESS)
    return refuse("cuptiDeviceGetChipName", r);
  step("initialize");

  // The driver's counter availability is required, though CUPTI accepts a host object without it for the
  // chips it knows: with such a host object its PC sampler takes no samples of kernels whose module holds
  // wgmma.
  CUpti_Profiler_GetCounterAvailability_Params avail = {
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  avail.ctx = hc.ctx;
  if (CUptiResult r = cuptiProfilerGetCounterAvailability(&avail); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerGetCounterAvailability", r);
  hc.availability.resize(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = hc.availability.data();
  if (CUptiResult r = cuptiProfilerGetCounterAvailability(&avail); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerGetCounterAvailability", r);
  step("counter_availability");

  if (CUptiResult r = hc.host.init(chip.pChipName, hc.availability); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerHostInitialize", r);
  step("host_object");
  // A metric this chip lacks is left out (by its base name against the chip's lists) instead of failing
  // the set: one refused name leaves the host object refusing every later one.
  std::set<std::string> bases;
  for (CUpti_MetricType type :
       {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
    CUpti_Profiler_Host_GetBaseMetrics_Params base = {CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
    base.pHostObject = hc.host.get();
    base.metricType = type;
    if (CUptiResult r = cuptiProfilerHostGetBaseMetrics(&base); r != CUPTI_SUCCESS)
      return refuse("cuptiProfilerHostGetBaseMetrics", r);
    for (std::size_t i = 0; i < base.numMetrics; ++i) bases.insert(base.ppMetricNames[i]);
  }
  for (const auto &name : hc.requested)
    (bases.count(name.substr(0, name.find('.'))) ? hc.accepted_names : hc.unavailable).push_back(name);
  for (const auto &name : hc.accepted_names) hc.accepted.push_back(name.c_str());
  if (hc.accepted.empty()) {
    hc.reason = "CUPTI accepted none of the metrics on this GPU";
    return;
  }
  CUpti_Profiler_Host_ConfigAddMetrics_Params add = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = hc.host.get();
  add.ppMetricNames = hc.accepted.data();
  add.numMetrics = hc.accepted.size();
  if (CUptiResult r = cuptiProfilerHostConfigAddMetrics(&add); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerHostConfigAddMetrics", r);
  CUpti_Profiler_Host_GetConfigImageSize_Params size = {
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  size.pHostObject = hc.host.get();
  if (CUptiResult r = cuptiProfilerHostGetConfigImageSize(&size); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerHostGetConfigImageSize", r);
  hc.config.resize(size.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params image = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  image.pHostObject = hc.host.get();
  image.configImageSize = hc.config.size();
  image.pConfigImage = hc.config.data();
  if (CUptiResult r = cuptiProfilerHostGetConfigImage(&image); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerHostGetConfigImage", r);
  CUpti_Profiler_Host_GetNumOfPasses_Params passes = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  passes.configImageSize = hc.config.size();
  passes.pConfigImage = hc.config.data();
  if (CUptiResult r = cuptiProfilerHostGetNumOfPasses(&passes); r != CUPTI_SUCCESS)
    return refuse("cuptiProfilerHostGetNumOfPasses", r);
  hc.passes = static_cast<int>(passes.numOfPasses);
  step("config_image");
}

/// The process's host configuration for these metrics on this context, made now unless made before
/// (`made_now` says which).
const HostConfig &host_config(CUcontext ctx, int device_ordinal, const std::vector<std::string> &metrics,
                              bool &made_now) {
  auto &slot = host_config_slot();
  made_now =
      !slot || slot->ctx != ctx || slot->device_ordinal != device_ordinal || slot->requested != metrics;
  if (made_now) {
    slot.reset();  // the old host object is deinitialized before a new one is made
    slot = std::make_unique<HostConfig>();
    slot->ctx = ctx;
    slot->device_ordinal = device_ordinal;
    slot->requested = metrics;
    build_host_config(*slot);
  }
  return *slot;
}

}  // namespace

std::string prepare_range_profiler(CUcontext ctx, int device_ordinal, const std::vector<std::string> &metrics,
                                   bool *made_now) {
  bool made = false;
  std::string reason = host_config(ctx, device_ordinal, metrics, made).reason;
  if (made_now) *made_now = made;
  return reason;
}

namespace {

/// Enables the range profiler on the context with per-kernel ranges and sizes the counter data for them.
/// "" or CUPTI's refusal.
std::string configure_target(CUcontext ctx, TargetObject &target, const HostConfig &hc,
                             std::vector<const char *> &accepted, std::vector<std::uint8_t> &counter_data) {
  if (CUptiResult r = target.enable(ctx); r != CUPTI_SUCCESS)
    return cupti_error("cuptiRangeProfilerEnable", r);
  CUpti_RangeProfiler_GetCounterDataSize_Params cds = {
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  cds.pRangeProfilerObject = target.get();
  cds.pMetricNames = accepted.data();
  cds.numMetrics = accepted.size();
  cds.maxNumOfRanges = kMaxKernelRanges;
  cds.maxNumRangeTreeNodes = kMaxKernelRanges;
  if (CUptiResult r = cuptiRangeProfilerGetCounterDataSize(&cds); r != CUPTI_SUCCESS)
    return cupti_error("cuptiRangeProfilerGetCounterDataSize", r);
  counter_data.assign(cds.counterDataSize, 0);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params cdi = {
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  cdi.pRangeProfilerObject = target.get();
  cdi.counterDataSize = counter_data.size();
  cdi.pCounterData = counter_data.data();
  if (CUptiResult r = cuptiRangeProfilerCounterDataImageInitialize(&cdi); r != CUPTI_SUCCESS)
    return cupti_error("cuptiRangeProfilerCounterDataImageInitialize", r);
  CUpti_RangeProfiler_SetConfig_Params set = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  set.pRangeProfilerObject = target.get();
  set.configSize = hc.config.size();
  set.pConfig = hc.config.data();
  set.counterDataImageSize = counter_data.size();
  set.pCounterDataImage = counter_data.data();
  // One range per kernel launch (auto range), not one range around the work: a user range also counts the
  // launch's own latency as GPU time (tens of microseconds), which dilutes every *_elapsed share of a short
  // kernel; per-kernel ranges measure what `ncu` measures.
  set.range = CUPTI_AutoRange;
  set.replayMode = CUPTI_UserReplay;
  set.maxRangesPerPass = kMaxKernelRanges;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  if (CUptiResult r = cuptiRangeProfilerSetConfig(&set); r != CUPTI_SUCCESS)
    return cupti_error("cuptiRangeProfilerSetConfig", r);
  return "";
}

/// Adds the seconds since `from` to `steps[step]` and restarts `from`.
void add_step(std::map<std::string, double> &steps, const char *step,
              std::chrono::steady_clock::time_point &from) {
  const auto now = std::chrono::steady_clock::now();
  steps[step] += std::chrono::duration<double>(now - from).count();
  from = now;
}

/// Runs `work` once per pass (after `prepare`) until CUPTI says every pass was submitted. "" or why not.
/// `steps`: host seconds per step, summed over the passes.
std::string run_passes(const TargetObject &target, int passes, const std::function<void()> &prepare,
                       const std::function<void()> &work, std::map<std::string, double> &steps) {
  auto t = std::chrono::steady_clock::now();
  for (int pass = 0;; ++pass) {
    if (pass > passes + 1) return "the range profiler did not finish its passes";
    prepare();
    add_step(steps, "prepare", t);
    CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    start.pRangeProfilerObject = target.get();
    if (CUptiResult r = cuptiRangeProfilerStart(&start); r != CUPTI_SUCCESS)
      return cupti_error("cuptiRangeProfilerStart", r);
    add_step(steps, pass == 0 ? "start_first" : "start", t);  // whether the first start carries the cost
    work();
    add_step(steps, "work", t);
    CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    stop.pRangeProfilerObject = target.get();
    if (CUptiResult r = cuptiRangeProfilerStop(&stop); r != CUPTI_SUCCESS)
      return cupti_error("cuptiRangeProfilerStop", r);
    add_step(steps, "stop", t);
    if (stop.isAllPassSubmitted) return "";
  }
}

/// Decodes the passes and evaluates each kernel's range. "" or why not.
std::string evaluate_ranges(const TargetObject &target, const HostConfig &hc,
                            std::vector<const char *> &accepted, std::vector<std::uint8_t> &counter_data,
                            std::vector<std::map<std::string, double>> &ranges) {
  CUpti_RangeProfiler_DecodeData_Params decode = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  decode.pRangeProfilerObject = target.get();
  if (CUptiResult r = cuptiRangeProfilerDecodeData(&decode); r != CUPTI_SUCCESS)
    return cupti_error("cuptiRangeProfilerDecodeData", r);
  if (decode.numOfRangeDropped > 0)
    return "the range profiler dropped " + std::to_string(decode.numOfRangeDropped) + " kernel range(s)";
  CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  if (CUptiResult r = cuptiRangeProfilerGetCounterDataInfo(&info); r != CUPTI_SUCCESS)
    return cupti_error("cuptiRangeProfilerGetCounterDataInfo", r);
  if (info.numTotalRanges == 0) return "the range profiler saw no kernel launch";
  std::vector<double> values(accepted.size());
  for (std::size_t range = 0; range < info.numTotalRanges; ++range) {
    CUpti_Profiler_Host_EvaluateToGpuValues_Params eval = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    eval.pHostObject = hc.host.get();
    eval.pCounterDataImage = counter_data.data();
    eval.counterDataImageSize = counter_data.size();
    eval.rangeIndex = range;
    eval.ppMetricNames = accepted.data();
    eval.numMetrics = accepted.size();
    eval.pMetricValues = values.data();
    if (CUptiResult r = cuptiProfilerHostEvaluateToGpuValues(&eval); r != CUPTI_SUCCESS)
      return cupti_error("cuptiProfilerHostEvaluateToGpuValues", r);
    auto &one = ranges.emplace_back();
    for (std::size_t i = 0; i < accepted.size(); ++i) one[accepted[i]] = values[i];
  }
  return "";
}

}  // namespace

RangeMetrics profile_range(CUcontext ctx, int device_ordinal, const std::vector<std::string> &metrics,
                           const std::function<void()> &prepare, const std::function<void()> &work,
                           int max_passes) {
  RangeMetrics out;
  const auto t0 = std::chrono::steady_clock::now();
  const auto seconds = [](auto from) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
  };
  const auto fail = [&](std::string why) {
    out.reason = std::move(why);
    return out;
  };
  bool made_now = false;
  const HostConfig &hc = host_config(ctx, device_ordinal, metrics, made_now);
  if (made_now)
    out.setup_steps = hc.steps;
  else
    out.setup_steps["host_config_made_ahead"] = 0;
  if (!hc.reason.empty()) return fail(hc.reason);
  out.unavailable = hc.unavailable;
  out.passes = hc.passes;
  if (out.passes > max_passes)
    return fail("the metrics need " + std::to_string(out.passes) + " passes (limit " +
                std::to_string(max_passes) + ")");
  std::vector<const char *> accepted = hc.accepted;  // CUPTI takes non-const arrays
  const auto t_target = std::chrono::steady_clock::now();
  TargetObject target;
  std::vector<std::uint8_t> counter_data;
  if (std::string why = configure_target(ctx, target, hc, accepted, counter_data); !why.empty())
    return fail(why);
  out.setup_steps["enable_and_counter_data"] = seconds(t_target);
  out.setup_seconds = seconds(t0);
  const auto t1 = std::chrono::steady_clock::now();
  if (std::string why = run_passes(target, out.passes, prepare, work, out.pass_steps); !why.empty())
    return fail(why);
  std::vector<std::map<std::string, double>> ranges;
  auto t_eval = std::chrono::steady_clock::now();
  if (std::string why = evaluate_ranges(target, hc, accepted, counter_data, ranges); !why.empty())
    return fail(why);
  add_step(out.pass_steps, "decode_and_evaluate", t_eval);
  out.kernels = static_cast<int>(ranges.size());
  out.values = combine_kernel_ranges(ranges);
  out.passes_seconds = seconds(t1);
  out.available = true;
  return out;
}

}  // namespace ptxbench::worker::detail
