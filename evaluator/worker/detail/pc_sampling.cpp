#include "evaluator/worker/detail/pc_sampling.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include <cupti.h>
#include <cupti_pcsampling.h>

#include "evaluator/worker/detail/sass_counts.hpp"

namespace ptxbench::worker::detail {
namespace {

constexpr std::string_view kStalledPrefix = "smsp__pcsamp_warps_issue_stalled_";
constexpr std::string_view kPcSampPrefix = "smsp__pcsamp_";
constexpr std::string_view kNotIssuedSuffix = "_not_issued";
/// PC records per collection buffer: more than the SASS instructions of any kernel we accept sampled
/// at once is not needed, the rest comes in further buffers.
constexpr std::size_t kPcsPerBuffer = 4096;
/// Buffers fetched after the stop at most (kPcsPerBuffer PCs each).
constexpr int kMaxBuffers = 16;

/// PC sampling on a context, disabled on every path.
class SamplingSession {
 public:
  explicit SamplingSession(CUcontext ctx) : ctx_(ctx) {}
  ~SamplingSession() {
    if (!enabled_) return;
    CUpti_PCSamplingDisableParams p = {CUpti_PCSamplingDisableParamsSize};
    p.ctx = ctx_;
    cuptiPCSamplingDisable(&p);
  }
  CUptiResult enable() {
    CUpti_PCSamplingEnableParams p = {CUpti_PCSamplingEnableParamsSize};
    p.ctx = ctx_;
    const CUptiResult r = cuptiPCSamplingEnable(&p);
    enabled_ = r == CUPTI_SUCCESS;
    return r;
  }

 private:
  CUcontext ctx_;
  bool enabled_ = false;
};

/// One collection buffer: `pcs` records, each with room for every collected stall reason.
struct CollectionBuffer {
  CUpti_PCSamplingData data{};
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<CUpti_PCSamplingStallReason> reasons;

  CollectionBuffer(std::size_t n_pcs, std::size_t n_reasons) : pcs(n_pcs), reasons(n_pcs * n_reasons) {
    for (std::size_t i = 0; i < n_pcs; ++i) {
      pcs[i].size = sizeof(CUpti_PCSamplingPCData);
      pcs[i].stallReason = reasons.data() + i * n_reasons;
    }
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = n_pcs;
    data.pPcData = pcs.data();
  }
};

CUpti_PCSamplingConfigurationInfo attribute(CUpti_PCSamplingConfigurationAttributeType type) {
  CUpti_PCSamplingConfigurationInfo info{};
  info.attributeType = type;
  return info;
}

}  // namespace

std::string short_stall_reason(const std::string &cupti_name) {
  std::string_view n = cupti_name;
  if (n.size() >= kNotIssuedSuffix.size() && n.substr(n.size() - kNotIssuedSuffix.size()) == kNotIssuedSuffix)
    return "";
  if (n.starts_with(kStalledPrefix)) return std::string(n.substr(kStalledPrefix.size()));
  if (n.starts_with(kPcSampPrefix)) return std::string(n.substr(kPcSampPrefix.size()));
  return std::string(n);
}

int pc_sampling_launches(double launch_ms, double min_ms, int max_launches) {
  const double launches = std::ceil(std::max(min_ms, 0.0) / std::max(launch_ms, 1e-6));
  return static_cast<int>(std::clamp(launches, 1.0, static_cast<double>(std::max(max_launches, 1))));
}

int pc_sampling_period_log2(double launch_ms, int sm_count, double sm_clock_mhz, double target_samples) {
  const double cycles = std::max(launch_ms, 1e-3) * 1e-3 * std::max(sm_clock_mhz, 100.0) * 1e6;
  const double period = cycles * std::max(sm_count, 1) / std::max(target_samples, 1.0);
  const int log2 = static_cast<int>(std::lround(std::log2(std::max(period, 1.0))));
  return std::clamp(log2, 5, 31);
}

namespace {

/// The warp states this GPU reports: CUPTI's index -> short name, and the indices to collect (the
/// "_not_issued" variants repeat the plain ones and are left out). "" or why not.
struct StallReasons {
  std::map<std::uint32_t, std::string> name_of;
  std::vector<std::uint32_t> collect;
};

std::string load_stall_reasons(CUcontext ctx, StallReasons &out) {
  std::size_t n_all = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np = {CUpti_PCSamplingGetNumStallReasonsParamsSize};
  np.ctx = ctx;
  np.numStallReasons = &n_all;
  if (CUptiResult r = cuptiPCSamplingGetNumStallReasons(&np); r != CUPTI_SUCCESS)
    return cupti_error("cuptiPCSamplingGetNumStallReasons", r);
  if (n_all == 0) return "CUPTI reports no warp states to sample on this GPU";
  std::vector<std::uint32_t> all_index(n_all);
  std::vector<std::vector<char>> name_storage(n_all, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE, '\0'));
  std::vector<char *> names(n_all);
  for (std::size_t i = 0; i < n_all; ++i) names[i] = name_storage[i].data();
  CUpti_PCSamplingGetStallReasonsParams sp = {CUpti_PCSamplingGetStallReasonsParamsSize};
  sp.ctx = ctx;
  sp.numStallReasons = n_all;
  sp.stallReasonIndex = all_index.data();
  sp.stallReasons = names.data();
  if (CUptiResult r = cuptiPCSamplingGetStallReasons(&sp); r != CUPTI_SUCCESS)
    return cupti_error("cuptiPCSamplingGetStallReasons", r);
  for (std::size_t i = 0; i < n_all; ++i) {
    std::string shortened = short_stall_reason(std::string(names[i]));
    if (shortened.empty()) continue;
    out.name_of[all_index[i]] = std::move(shortened);
    out.collect.push_back(all_index[i]);
  }
  return "";
}

/// Period, warp states, mode, start/stop control, parsed output and the first collection buffer. "" or why
/// CUPTI refused (naming the refused attribute).
std::string configure_sampling(CUcontext ctx, int period_log2, const SamplerOptions &options,
                               StallReasons &reasons_wanted, CollectionBuffer &first) {
  std::vector<CUpti_PCSamplingConfigurationInfo> config;
  auto period = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD);
  period.attributeData.samplingPeriodData.samplingPeriod = static_cast<std::uint32_t>(period_log2);
  config.push_back(period);
  auto reasons = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON);
  reasons.attributeData.stallReasonData.stallReasonCount = reasons_wanted.collect.size();
  reasons.attributeData.stallReasonData.pStallReasonIndex = reasons_wanted.collect.data();
  config.push_back(reasons);
  auto mode = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE);
  mode.attributeData.collectionModeData.collectionMode =
      options.mode == PcSamplingMode::continuous ? CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS
                                                 : CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  config.push_back(mode);
  auto start_stop = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL);
  start_stop.attributeData.enableStartStopControlData.enableStartStopControl = 1;
  config.push_back(start_stop);
  auto format = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT);
  format.attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  config.push_back(format);
  if (options.hardware_buffer_bytes > 0) {
    auto hardware = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE);
    hardware.attributeData.hardwareBufferSizeData.hardwareBufferSize = options.hardware_buffer_bytes;
    config.push_back(hardware);
  }
  if (options.worker_sleep_ms > 0) {
    auto sleep = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN);
    sleep.attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan =
        options.worker_sleep_ms;
    config.push_back(sleep);
  }
  auto buffer = attribute(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER);
  buffer.attributeData.samplingDataBufferData.samplingDataBuffer = &first.data;
  config.push_back(buffer);
  CUpti_PCSamplingConfigurationInfoParams cp = {CUpti_PCSamplingConfigurationInfoParamsSize};
  cp.ctx = ctx;
  cp.numAttributes = config.size();
  cp.pPCSamplingConfigurationInfo = config.data();
  if (CUptiResult r = cuptiPCSamplingSetConfigurationAttribute(&cp); r != CUPTI_SUCCESS) {
    for (const auto &c : config)
      if (c.attributeStatus != CUPTI_SUCCESS)
        return cupti_error(("cuptiPCSamplingSetConfigurationAttribute (attribute " +
                            std::to_string(static_cast<int>(c.attributeType)) + ")")
                               .c_str(),
                           c.attributeStatus);
    return cupti_error("cuptiPCSamplingSetConfigurationAttribute", r);
  }
  return "";
}

/// The PC records of a stopped sampling session: the configured buffer, then what did not fit, fetched
/// with GetData (at most kMaxBuffers more). Rows with samples, most sampled first.
class Collector {
 public:
  Collector(CUcontext ctx, const StallReasons &reasons, PcSamples &out)
      : ctx_(ctx), reasons_(reasons), out_(out) {}

  std::string collect(const CollectionBuffer &first) {
    absorb(first.data);
    std::size_t remaining = first.data.remainingNumPcs;
    overflowed_ = first.data.hardwareBufferFull != 0;
    auto more = std::make_unique<CollectionBuffer>(kPcsPerBuffer, reasons_.collect.size());
    for (int b = 0; b < kMaxBuffers && remaining > 0; ++b) {
      more->data.totalNumPcs = 0;
      more->data.remainingNumPcs = 0;
      more->data.totalSamples = 0;
      more->data.droppedSamples = 0;
      CUpti_PCSamplingGetDataParams gp = {CUpti_PCSamplingGetDataParamsSize};
      gp.ctx = ctx_;
      gp.pcSamplingData = &more->data;
      if (CUptiResult r = cuptiPCSamplingGetData(&gp); r != CUPTI_SUCCESS)
        return cupti_error("cuptiPCSamplingGetData", r);
      absorb(more->data);
      remaining = more->data.remainingNumPcs;
    }
    for (auto &[key, row] : rows_)
      if (row.samples > 0) out_.rows.push_back(std::move(row));
    std::sort(out_.rows.begin(), out_.rows.end(), [](const SampledPcRow &a, const SampledPcRow &b) {
      return a.samples != b.samples ? a.samples > b.samples : a.offset < b.offset;
    });
    return "";
  }

  /// Why no row came back (after collect found none).
  std::string why_empty() const {
    if (overflowed_) return "the sampling buffer overflowed before any record was kept";
    if (out_.total_samples == 0) return "the PC sampler returned no samples for the sampled launches";
    return "none of the " + std::to_string(out_.total_samples) + " samples came with a PC of this kernel (" +
           std::to_string(non_user_) + " in other kernels, " + std::to_string(records_) + " PC records)";
  }

 private:
  void absorb(const CUpti_PCSamplingData &d) {
    out_.total_samples += d.totalSamples;
    non_user_ += d.nonUsrKernelsTotalSamples;
    records_ += d.totalNumPcs;
    out_.dropped_samples += d.droppedSamples;
    for (std::size_t i = 0; i < d.totalNumPcs && i < d.collectNumPcs; ++i) {
      const CUpti_PCSamplingPCData &pc = d.pPcData[i];
      // functionName is CUPTI's allocation, possibly shared with later records: copied, never freed here
      // (the worker process ends soon after; a double free would not).
      const std::string function = pc.functionName ? pc.functionName : "";
      SampledPcRow &row = rows_[{function, static_cast<std::uint32_t>(pc.pcOffset)}];
      row.function = function;
      row.offset = static_cast<std::uint32_t>(pc.pcOffset);
      for (std::size_t k = 0; k < pc.stallReasonCount && k < reasons_.collect.size(); ++k) {
        const auto it = reasons_.name_of.find(pc.stallReason[k].pcSamplingStallReasonIndex);
        if (it == reasons_.name_of.end() || pc.stallReason[k].samples == 0) continue;
        row.reasons[it->second] += pc.stallReason[k].samples;
        row.samples += pc.stallReason[k].samples;
      }
    }
  }

  CUcontext ctx_;
  const StallReasons &reasons_;
  PcSamples &out_;
  std::map<std::pair<std::string, std::uint32_t>, SampledPcRow> rows_;
  std::uint64_t non_user_ = 0, records_ = 0;
  bool overflowed_ = false;
};

}  // namespace

PcSamples sample_pcs(CUcontext ctx, int period_log2, const std::function<std::string()> &prepare,
                     const std::function<void()> &work, const SamplerOptions &options,
                     std::shared_ptr<void> *keep_enabled) {
  PcSamples out;
  out.period_log2 = period_log2;
  const auto t0 = std::chrono::steady_clock::now();
  const auto finish = [&](std::string why) -> PcSamples & {
    out.reason = std::move(why);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  };
  auto step_start = t0;
  const auto step = [&](const char *name) {
    const auto now = std::chrono::steady_clock::now();
    out.steps[name] = std::chrono::duration<double>(now - step_start).count();
    step_start = now;
  };
  const auto session = std::make_shared<SamplingSession>(ctx);
  if (keep_enabled) *keep_enabled = session;
  if (CUptiResult r = session->enable(); r != CUPTI_SUCCESS)
    return finish(cupti_error("cuptiPCSamplingEnable", r));
  step("enable");
  StallReasons reasons;
  if (std::string why = load_stall_reasons(ctx, reasons); !why.empty()) return finish(why);
  step("stall_reasons");
  auto first = std::make_unique<CollectionBuffer>(kPcsPerBuffer, reasons.collect.size());
  if (std::string why = configure_sampling(ctx, period_log2, options, reasons, *first); !why.empty())
    return finish(why);
  step("configure");
  if (std::string why = prepare(); !why.empty()) return finish(why);
  step("prepare");
  CUpti_PCSamplingStartParams start = {CUpti_PCSamplingStartParamsSize};
  start.ctx = ctx;
  if (CUptiResult r = cuptiPCSamplingStart(&start); r != CUPTI_SUCCESS)
    return finish(cupti_error("cuptiPCSamplingStart", r));
  work();
  CUpti_PCSamplingStopParams stop = {CUpti_PCSamplingStopParamsSize};
  stop.ctx = ctx;
  if (CUptiResult r = cuptiPCSamplingStop(&stop); r != CUPTI_SUCCESS)
    return finish(cupti_error("cuptiPCSamplingStop", r));
  step("sampled_launch");
  // Records land in the configured buffer at the stop; what did not fit is fetched with GetData.
  Collector collector(ctx, reasons, out);
  if (std::string why = collector.collect(*first); !why.empty()) return finish(why);
  step("collect");
  out.collected = true;
  if (out.rows.empty()) return finish(collector.why_empty());
  out.available = true;
  return finish("");
}

}  // namespace ptxbench::worker::detail
