// The profile stage: hardware metrics of one launch of a correct kernel through CUPTI's range profiler,
// the library's figures for the same workload beside them (measured once per shape and GPU, then read
// from the selection cache folder), the occupancy with what limits it, and the PCs of one more launch
// sampled with their warp states (mapped to source lines by the orchestrator). Runs last, after every timed
// launch, and never changes the status or the axes.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "evaluator/worker/detail/pc_sampling.hpp"
#include "evaluator/worker/detail/profile_metrics.hpp"
#include "evaluator/worker/detail/profile_stage.hpp"
#include "evaluator/worker/detail/range_profiler.hpp"
#include "evaluator/worker/family.hpp"
#include "evaluator/worker/selection_cache.hpp"

namespace ptxbench::worker::detail {
namespace {

/// ms: CUPTI's PC-sampling set-up and collection around the sampled launches (about this on Hopper, whatever
/// the launch).
constexpr double kPcSamplingSetupMs = 150;
/// Launches sampled together at most (a kernel of microseconds).
constexpr int kMaxSampledLaunches = 32;
/// Sampled PCs the worker hands over (the orchestrator maps them to lines and keeps fewer).
constexpr std::size_t kMaxHandedPcs = 512;

int device_attribute(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  PTXB_CU(cuDeviceGetAttribute(&v, a, dev));
  return v;
}

}  // namespace

protocol::Occupancy ProfileStage::occupancy(const JobWorkload &w) const {
  const LaunchPlan &l = w.launch;
  protocol::Occupancy o;
  o.block_threads = static_cast<int>(l.block[0] * l.block[1] * l.block[2]);
  o.cluster_size = static_cast<int>(l.cluster[0] * l.cluster[1] * l.cluster[2]);
  o.grid_blocks = static_cast<int>(l.grid[0] * l.grid[1] * l.grid[2]);
  o.sm_count = ctx_.device().facts.sm_count;
  const CUfunction f = ctx_.kernel().function();
  int regs = 0, static_smem = 0;
  PTXB_CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  PTXB_CU(cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
  o.registers_per_thread = regs;
  o.shared_bytes = static_smem + l.shared_bytes;
  const CUdevice dev = ctx_.device().dev;
  const int max_threads = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  const int max_blocks = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  const int regs_per_sm = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  const int smem_per_sm = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  const int smem_reserved = device_attribute(dev, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  o.max_warps_per_sm = max_threads / 32;
  const int warps_per_block = std::max(1, (o.block_threads + 31) / 32);
  int blocks = 0;
  PTXB_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, o.block_threads,
                                                      static_cast<std::size_t>(l.shared_bytes)));
  o.blocks_per_sm = blocks;
  o.warps_per_sm = blocks * warps_per_block;
  o.theoretical_pct = o.max_warps_per_sm ? 100.0 * o.warps_per_sm / o.max_warps_per_sm : 0;
  // Which resource allows the fewest blocks (registers are allocated per warp in 256-register units).
  const int regs_per_warp = ((std::max(regs, 1) * 32 + 255) / 256) * 256;
  const std::pair<int, const char *> limits[] = {
      {o.max_warps_per_sm / warps_per_block, "warps"},
      {regs_per_sm / (regs_per_warp * warps_per_block), "registers"},
      {o.shared_bytes > 0 ? smem_per_sm / static_cast<int>(o.shared_bytes + smem_reserved) : max_blocks,
       "shared memory"},
      {max_blocks, "block slots"}};
  const auto *least = &limits[0];
  for (const auto &lim : limits)
    if (lim.first < least->first) least = &lim;
  o.limiter = least->second;
  if (o.cluster_size > 1) {
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = static_cast<unsigned>(l.cluster[0]);
    attr.value.clusterDim.y = static_cast<unsigned>(l.cluster[1]);
    attr.value.clusterDim.z = static_cast<unsigned>(l.cluster[2]);
    CUlaunchConfig cfg{};
    cfg.gridDimX = static_cast<unsigned>(l.grid[0]);
    cfg.gridDimY = static_cast<unsigned>(l.grid[1]);
    cfg.gridDimZ = static_cast<unsigned>(l.grid[2]);
    cfg.blockDimX = static_cast<unsigned>(l.block[0]);
    cfg.blockDimY = static_cast<unsigned>(l.block[1]);
    cfg.blockDimZ = static_cast<unsigned>(l.block[2]);
    cfg.sharedMemBytes = static_cast<unsigned>(l.shared_bytes);
    cfg.hStream = ctx_.stream();
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (cuOccupancyMaxActiveClusters(&clusters, f, &cfg) == CUDA_SUCCESS) {
      o.active_clusters = clusters;
      // Fewer co-resident CTAs than the per-SM figure allows: cluster placement is the limit.
      if (static_cast<std::int64_t>(clusters) * o.cluster_size <
          static_cast<std::int64_t>(blocks) * o.sm_count)
        o.limiter = "cluster";
    }
  }
  return o;
}

void ProfileStage::profile_too_slow(double launch_ms, const std::string &passes, Clock::time_point start) {
  const double budget_ms = static_cast<double>(ctx_.job().profile.budget.count());
  ctx_.set_stage("profile",
                 stage_json(Status::skipped,
                            "not profiled: its " + fmt_num(launch_ms) + " ms launch, replayed once per " +
                                "profiler pass (" + passes + "), does not fit the " +
                                fmt_num(budget_ms / 1000.0) + " s profile budget",
                            json::array(), json::object(), seconds_since(start)));
}

std::optional<int> ProfileStage::profile_max_passes(double launch_ms, Clock::time_point start) {
  // The stage's GPU time: the range profiler's set-up, then one replay of the launch per pass plus the tens
  // of milliseconds of its own work around each.
  constexpr double kSetupMs = 200, kPassOverheadMs = 45;
  const double budget_ms = static_cast<double>(ctx_.job().profile.budget.count());
  const int max_passes = static_cast<int>(std::floor((budget_ms - kSetupMs) / (launch_ms + kPassOverheadMs)));
  if (max_passes < 1) {
    profile_too_slow(launch_ms, "at least one", start);
    return std::nullopt;
  }
  // The pass count depends only on the metrics and the GPU: known from an earlier worker, a kernel too slow
  // for the budget is skipped before CUPTI's set-up.
  if (const auto known = selection_cache_get(profile_passes_key()); known && known->is_number_integer())
    if (const int passes = known->get<int>(); passes > max_passes) {
      profile_too_slow(launch_ms, std::to_string(passes) + " passes", start);
      return std::nullopt;
    }
  return max_passes;
}

int ProfileStage::sampled_launches(double launch_ms) const {
  return detail::pc_sampling_launches(
      launch_ms, static_cast<double>(ctx_.job().profile.pc_sampling_min_time.count()), kMaxSampledLaunches);
}

std::string ProfileStage::profile_passes_key() const {
  std::string key = "profile-passes";
  for (const auto &name : profile_metric_names(ctx_.job().profile.metrics)) key += "|" + name;
  return key;
}

RangeMetrics ProfileStage::profile_candidate(const JobWorkload &w, TensorSet &tensors,
                                             detail::PackedParams &params, int max_passes) {
  return profile_range(
      ctx_.device().ctx, ctx_.device().facts.ordinal, profile_metric_names(ctx_.job().profile.metrics),
      [&] {
        ctx_.poison_outputs(w.spec, tensors);
        ctx_.reset_workspace(tensors);
        PTXB_CUDA(cudaStreamSynchronize(ctx_.stream()));
      },
      [&] {
        const CUresult r = ctx_.kernel().launch(w.launch, params, ctx_.stream());
        if (r != CUDA_SUCCESS)
          ctx_.fatal("profile", detail::is_sticky(r) ? Status::runtime_error : Status::launch_error,
                     "the profiled launch failed: " + detail::describe(r) + " (" +
                         ctx_.launch_context(w, "profiled launch") + ")");
        // A blocking wait, not the hang watch's polling: the kernel ran to completion in every earlier
        // stage, and the worker's wall limit still bounds it.
        if (const CUresult s = cuStreamSynchronize(ctx_.stream()); s != CUDA_SUCCESS)
          ctx_.fatal("profile", Status::runtime_error,
                     "the kernel faulted under the profiler: " + detail::describe(s));
      },
      max_passes);
}

std::optional<std::map<std::string, double>> ProfileStage::library_figures(const JobWorkload &w,
                                                                           const TensorSet &tensors,
                                                                           std::string &source) {
  // The workload without the candidate's launch plan: the library's figures depend on the shape.
  json shape = w;
  shape.erase("launch");
  const std::vector<std::string> names = profile_metric_names(ctx_.job().profile.metrics);
  std::string key = "library-profile|" + ctx_.job().family + "|" + ctx_.job().reference + "|" + shape.dump();
  for (const auto &n : names) key += "|" + n;
  if (auto cached = selection_cache_get(key); cached && cached->is_object()) {
    source = "cached";
    return cached->get<std::map<std::string, double>>();
  }
  std::map<std::string, double> library;
  source = profile_library(w, tensors, names, library);
  if (source != "measured") return std::nullopt;
  selection_cache_put(key, json(library));
  return library;
}

void ProfileStage::run(bool correct) {
  const auto start = Clock::now();
  if (!correct) {
    ctx_.set_stage("profile", stage_json(Status::skipped, "not profiled: the outputs were not correct"));
    return;
  }
  // The largest shown workload: the one whose time dominates the speedup.
  std::size_t pick = 0;
  for (std::size_t i = 1; i < ctx_.job().workloads.size(); ++i)
    if (ctx_.job().workloads[i].spec.flops > ctx_.job().workloads[pick].spec.flops) pick = i;
  const JobWorkload &w = ctx_.job().workloads[pick];
  const double launch_ms = std::max({ctx_.slowest_launch_ms(), ctx_.correctness_launch_ms(), 0.001});
  const std::optional<int> max_passes = profile_max_passes(launch_ms, start);
  if (!max_passes) return;
  PhaseSeconds phases{ctx_.stream()};
  ctx_.prepare("profile", w);
  BufferPool pool(256, ctx_.stream());
  TensorSet tensors = ctx_.workload_tensors(pick, pool, 0x9F0ull);
  ctx_.add_workspace(w, pool, tensors);
  detail::PackedParams params;
  ctx_.pack("profile", w, tensors, params);
  phases.mark("inputs");
  const RangeMetrics cand = profile_candidate(w, tensors, params, *max_passes);
  phases.mark("candidate");
  if (cand.passes > 0) selection_cache_put(profile_passes_key(), cand.passes);
  phases.seconds["candidate_cupti_setup"] = cand.setup_seconds;
  for (const auto &[step, s] : cand.setup_steps) phases.seconds["candidate_cupti_" + step] = s;
  phases.seconds["candidate_passes"] = cand.passes_seconds;
  for (const auto &[step, s] : cand.pass_steps) phases.seconds["candidate_pass_" + step] = s;
  if (!cand.available && cand.passes > *max_passes) {
    profile_too_slow(launch_ms, std::to_string(cand.passes) + " passes", start);
    return;
  }
  if (!cand.available) {
    ctx_.set_stage("profile", stage_json(Status::skipped, "not profiled: " + cand.reason,
                                         json::array({diag(cand.reason, "warning")}), json::object(),
                                         seconds_since(start)));
    return;
  }
  protocol::KernelProfile kp;
  kp.workload = w.spec.name;
  kp.unavailable = cand.unavailable;
  kp.passes = cand.passes;
  kp.occupancy = occupancy(w);
  phases.mark("occupancy");
  std::optional<std::map<std::string, double>> library;
  if (ctx_.job().profile.library) library = library_figures(w, tensors, kp.library_source);
  phases.mark("library");
  kp.metrics = profile_metrics(cand.values, library ? &*library : nullptr);
  if (ctx_.job().profile.pc_sampling) {
    kp.pc_sampling = pc_sampling_within_budget(w, tensors, params, cand.values, launch_ms, phases.seconds);
    phases.mark("pc_sampling");
  }
  std::string summary = "profiled workload " + w.spec.name + " (" + std::to_string(kp.passes) + " passes)";
  if (const protocol::ProfileMetric *b = kp.bound_unit()) {
    summary += "; closest to its peak: " + b->label + " at " + fmt_num(b->value) + "%";
    if (b->library) summary += " (library: " + fmt_num(*b->library) + "%)";
  }
  ctx_.set_stage(
      "profile",
      stage_json(Status::ok, summary, json::array(),
                 json(protocol::ProfileFigures{kp, phases.seconds.get<std::map<std::string, double>>()}),
                 seconds_since(start)));
}

protocol::PcSampling ProfileStage::pc_sampling_within_budget(const JobWorkload &w, const TensorSet &tensors,
                                                             detail::PackedParams &params,
                                                             const std::map<std::string, double> &measured,
                                                             double launch_ms, json &phase_seconds) {
  const double sampling_budget_ms = static_cast<double>(ctx_.job().profile.pc_sampling_budget.count());
  if (kPcSamplingSetupMs + launch_ms * sampled_launches(launch_ms) <= sampling_budget_ms)
    return sample_launch(w, tensors, params, measured, launch_ms, phase_seconds);
  protocol::PcSampling out;
  out.unavailable = "not sampled: its " + fmt_num(launch_ms) +
                    " ms launch with the sampler's set-up does not fit the " +
                    fmt_num(sampling_budget_ms / 1000.0) + " s sampling budget";
  return out;
}

protocol::PcSampling ProfileStage::sample_launch(const JobWorkload &w, const TensorSet &tensors,
                                                 detail::PackedParams &params,
                                                 const std::map<std::string, double> &measured,
                                                 double launch_ms, json &phase_seconds) {
  protocol::PcSampling out;
  // The period from the profiled launch's own duration and clock where measured.
  const auto figure = [&](const char *name, double fallback) {
    const auto it = measured.find(name);
    return it != measured.end() && it->second > 0 ? it->second : fallback;
  };
  const double ms = figure("gpu__time_duration.sum", launch_ms * 1e6) / 1e6;
  const double mhz = figure("sm__cycles_elapsed.avg.per_second", 1.755e9) / 1e6;
  const int launches = sampled_launches(ms);
  const int period = detail::pc_sampling_period_log2(ms * launches, ctx_.device().facts.sm_count, mhz,
                                                     static_cast<double>(ctx_.job().profile.pc_samples));
  // Each try loads its own copy of the module while sampling is on (see sample_pcs). The last try's session
  // and the copies are torn down after the result is written, since the verdict need not wait for them;
  // the session is disabled before the copies' modules are unloaded.
  struct Teardown {
    std::vector<std::unique_ptr<detail::CandidateKernel>> copies;
    std::shared_ptr<void> session;  ///< declared last: destroyed first
  };
  const auto teardown = std::make_shared<Teardown>();
  ctx_.release_after_finish(teardown);
  const auto sample = [&](detail::PcSamplingMode mode) {
    teardown->session.reset();  // an earlier try's session, disabled before the next one is enabled
    detail::CandidateKernel &sampled =
        *teardown->copies.emplace_back(std::make_unique<detail::CandidateKernel>());
    detail::PcSamples got = detail::sample_pcs(
        ctx_.device().ctx, period,
        [&]() -> std::string {
          std::string why = sampled.load(read_all(ctx_.job().cubin_path), ctx_.job().entry);
          if (why.empty()) why = sampled.prepare_launch(w.launch);
          if (!why.empty()) return "the module could not be loaded again for sampling: " + why;
          ctx_.poison_outputs(w.spec, tensors);
          ctx_.reset_workspace(tensors);
          PTXB_CUDA(cudaStreamSynchronize(ctx_.stream()));
          return "";
        },
        [&] {
          for (int i = 0; i < launches; ++i) {
            if (i > 0) {  // every launch starts from the state the others did
              ctx_.poison_outputs(w.spec, tensors);
              ctx_.reset_workspace(tensors);
            }
            const CUresult r = sampled.launch(w.launch, params, ctx_.stream());
            if (r != CUDA_SUCCESS)
              ctx_.fatal("profile", detail::is_sticky(r) ? Status::runtime_error : Status::launch_error,
                         "the PC-sampled launch failed: " + detail::describe(r));
            if (const CUresult s = cuStreamSynchronize(ctx_.stream()); s != CUDA_SUCCESS)
              ctx_.fatal("profile", Status::runtime_error,
                         "the kernel faulted while PC-sampled: " + detail::describe(s));
          }
        },
        detail::SamplerOptions{
            mode, static_cast<std::size_t>(ctx_.job().profile.pc_sampling_hardware_buffer_mib) << 20,
            ctx_.job().profile.pc_sampling_worker_sleep_ms},
        &teardown->session);
    const std::string prefix =
        mode == detail::PcSamplingMode::continuous ? "pc_sampling_continuous_" : "pc_sampling_";
    for (const auto &[step, seconds] : got.steps)
      phase_seconds[prefix + step] = phase_seconds.value(prefix + step, 0.0) + seconds;
    return got;
  };
  detail::PcSamples samples = sample(detail::PcSamplingMode::kernel_serialized);
  // When kernel-serialized sampling returns nothing at all: one more try in continuous mode, the only other
  // mode CUPTI has, when the policy asks for it.
  if (ctx_.job().profile.pc_sampling_continuous_retry && !samples.available && samples.collected &&
      samples.total_samples == 0) {
    detail::PcSamples again = sample(detail::PcSamplingMode::continuous);
    if (again.available)
      samples = std::move(again);
    else
      samples.reason += "; continuous mode: " + again.reason;
  }
  out.period_log2 = samples.period_log2;
  out.launches = launches;
  out.dropped_samples = samples.dropped_samples;
  if (!samples.available) {
    out.unavailable = "not sampled: " + samples.reason;
    return out;
  }
  tally_samples(samples, out);
  return out;
}

void ProfileStage::tally_samples(const detail::PcSamples &samples, protocol::PcSampling &out) {
  std::map<std::string, std::uint64_t> reasons;
  for (const auto &row : samples.rows) {
    out.samples += row.samples;
    for (const auto &[reason, n] : row.reasons) reasons[reason] += n;
  }
  const auto by_samples = [](const protocol::StallCount &a, const protocol::StallCount &b) {
    return a.samples != b.samples ? a.samples > b.samples : a.reason < b.reason;
  };
  for (const auto &[reason, n] : reasons) out.reasons.push_back({reason, n});
  std::sort(out.reasons.begin(), out.reasons.end(), by_samples);
  for (std::size_t i = 0; i < samples.rows.size() && i < kMaxHandedPcs; ++i) {
    const auto &row = samples.rows[i];
    protocol::SampledPc pc{row.function, row.offset, row.samples, {}};
    for (const auto &[reason, n] : row.reasons) pc.reasons.push_back({reason, n});
    std::sort(pc.reasons.begin(), pc.reasons.end(), by_samples);
    out.pcs.push_back(std::move(pc));
  }
}

std::string ProfileStage::profile_library(const JobWorkload &w, const TensorSet &inputs,
                                          const std::vector<std::string> &names,
                                          std::map<std::string, double> &out) {
  BufferPool pool(256, ctx_.stream());
  TensorSet lib_out, lib_in;
  for (const auto &t : w.spec.tensors) {
    if (t.is_output)
      lib_out[t.name] = pool.tensor(t);
    else
      lib_in[t.name] = inputs.at(t.name);
  }
  try {
    ctx_.family()->prepare_library(w.spec, lib_in, lib_out, ctx_.stream());
  } catch (const WorkerError &e) {
    if (e.kind() == "runtime_error") throw;
    return std::string("not measured: the library could not run: ") + e.what();
  }
  const RangeMetrics lib = profile_range(
      ctx_.device().ctx, ctx_.device().facts.ordinal, names,
      [&] { PTXB_CUDA(cudaStreamSynchronize(ctx_.stream())); },
      [&] {
        ctx_.family()->run_library(lib_in, lib_out, ctx_.stream());
        PTXB_CUDA(cudaStreamSynchronize(ctx_.stream()));
      });
  ctx_.family()->release_library();
  if (!lib.available) return "not measured: " + lib.reason;
  out = lib.values;
  return "measured";
}

}  // namespace ptxbench::worker::detail
