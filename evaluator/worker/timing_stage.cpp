// The timing stage: candidate and library interleaved on cold L2, sampled until the median is settled.
#include "evaluator/worker/detail/timing_stage.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "evaluator/worker/detail/nvml_clock.hpp"
#include "evaluator/worker/detail/timing_stats.hpp"
#include "evaluator/worker/family.hpp"

namespace ptxbench::worker::detail {

/// One workload's input sets (candidate and library share the inputs; each has its own outputs), their
/// fp32 references and the candidate's packed parameters per set.
struct TimingStage::TimingInputs {
  TimingInputs(cudaStream_t stream, int sets)
      : pool(256, stream), cand(sets), lib(sets), refs(sets), params(sets) {}
  BufferPool pool;
  std::vector<TensorSet> cand, lib;
  std::vector<ReferenceSet> refs;
  std::vector<detail::PackedParams> params;
  TensorSet cand_out, lib_out;
};

/// One workload's samples, ms, and the re-checks of timed launches' outputs.
struct TimingStage::TimingSamples {
  std::vector<double> cand_ms, lib_ms;
  protocol::Reverified reverify;
  int last_set =
      0;  ///< input set of the last timed candidate launch (its output is re-checked after the loop)
  Clock::time_point loop_start;
  protocol::TimingStop stopped_by = protocol::TimingStop::max_seconds;  ///< what ended the sampling
  int warmup_launches = 0;        ///< untimed candidate launches before sampling (candidate_warmups)
  std::vector<double> poison_ms;  ///< GPU time of the output poison before each timed candidate launch
  bool inputs_mutated = false;    ///< an input set's checksum changed over the warm-ups and timed launches
};

int TimingStage::candidate_warmups(const TimingPolicy &tp) const {
  if (tp.warmup_budget_ms <= 0 || ctx_.correctness_launch_ms() <= 0) return tp.warmup_launches;
  const double fit = std::floor(tp.warmup_budget_ms / ctx_.correctness_launch_ms());
  return static_cast<int>(std::min<double>(tp.warmup_launches, fit));
}

void TimingStage::run() {
  const auto start = Clock::now();
  TimingRun run(ctx_.job().timing, ctx_.device().facts, ctx_.stream(), ctx_.job().correctness.base_seed);
  for (std::size_t wi = 0; wi < ctx_.job().workloads.size(); ++wi) {
    if (time_workload(ctx_.job().workloads[wi], wi, run)) continue;
    run.release();
    ctx_.set_stage("timing",
                   stage_json(Status::skipped, "the reference library could not run: " + run.library_error,
                              json::array({diag(run.library_error, "warning")})));
    return;
  }
  run.release();
  ctx_.set_stage("timing", timing_result(run, seconds_since(start)));
}

bool TimingStage::time_workload(const JobWorkload &w, std::size_t wi, TimingRun &run) {
  const TimingPolicy &tp = run.tp;
  ctx_.prepare(run.stage, w);
  TimingInputs in(ctx_.stream(), tp.input_sets);
  timing_inputs(run.stage, wi, w, in);
  run.phases.mark("inputs");
  LibraryInfo info;
  try {
    TensorSet lib_inputs = in.lib[0];
    info = ctx_.family()->prepare_library(w.spec, lib_inputs, in.lib_out, ctx_.stream());
  } catch (const WorkerError &e) {
    if (e.kind() == "runtime_error") throw;
    run.library_error = e.what();
    return false;
  }
  run.figures.library = {info.name, info.version, info.algo};
  run.phases.mark("library_selection");

  const int sets = tp.input_sets;
  // Checked again after the timed launches, as after each correctness trial: a kernel that modifies
  // its inputs only when it is timed is caught too.
  std::vector<std::uint64_t> input_sums(static_cast<std::size_t>(sets));
  for (int s = 0; s < sets; ++s)
    input_sums[static_cast<std::size_t>(s)] = ctx_.input_checksum(w.spec, in.cand[s]);
  TimingSamples samples;
  samples.warmup_launches = candidate_warmups(tp);
  for (int i = 0; i < std::max(samples.warmup_launches, tp.warmup_launches); ++i) {
    if (i < samples.warmup_launches) {
      ctx_.poison_outputs(w.spec, in.cand[i % sets]);  // every candidate launch starts from the same state
      ctx_.reset_workspace(in.cand[i % sets]);
      ctx_.launch_and_wait(run.stage, w, in.params[i % sets], "warm-up");
    }
    if (i < tp.warmup_launches) ctx_.family()->run_library(in.lib[i % sets], in.lib_out, ctx_.stream());
  }
  PTXB_CUDA(cudaStreamSynchronize(ctx_.stream()));
  sample_workload(w, in, run, samples);
  run.phases.mark("sampling");
  // The poison writes ran inside the sampling loop, outside every timed region: their GPU time is
  // reported apart (phase output_poison) rather than inside sampling.
  double poison_seconds = 0;
  for (double ms : samples.poison_ms) poison_seconds += ms / 1000.0;
  run.phases.seconds["sampling"] = run.phases.seconds.value("sampling", 0.0) - poison_seconds;
  run.phases.seconds["output_poison"] = run.phases.seconds.value("output_poison", 0.0) + poison_seconds;
  if (tp.reverify_random_launch) {
    // Also the LAST timed launch: a kernel that turns wrong (and cheap) only after the random
    // re-check would otherwise keep an inflated speedup.
    const std::uint64_t bad = wrong_outputs(w, in, samples.last_set);
    samples.reverify.last_launch =
        protocol::ReverifiedLaunch{static_cast<int>(samples.cand_ms.size()), samples.last_set, bad};
    if (bad) {
      run.suspicious = true;
      run.diagnostics.push_back(diag("workload " + w.spec.name + ": the output of the last timed launch (" +
                                     std::to_string(samples.cand_ms.size()) + ") had " + std::to_string(bad) +
                                     " wrong elements although the correctness trials passed"));
    }
  }
  bool inputs_mutated = false;
  for (int s = 0; s < sets; ++s)
    inputs_mutated =
        inputs_mutated || ctx_.input_checksum(w.spec, in.cand[s]) != input_sums[static_cast<std::size_t>(s)];
  samples.inputs_mutated = inputs_mutated;
  if (inputs_mutated) {
    run.suspicious = true;
    run.diagnostics.push_back(diag("workload " + w.spec.name +
                                   ": the kernel modified its input tensors during the warm-up or timed "
                                   "launches (their checksums before and after differ) although the "
                                   "correctness trials left them intact"));
  }
  double workload_clock = 0;  // SM clock right after this workload's sampling
  if (auto mhz = detail::sm_clock_mhz(ctx_.device().facts.pci_bus_id)) run.sm_clock = workload_clock = *mhz;
  ctx_.family()->release_library();
  run.figures.workloads.push_back(workload_timing(w, samples, workload_clock, run));
  return true;
}

void TimingStage::timing_inputs(const char *stage, std::size_t wi, const JobWorkload &w, TimingInputs &in) {
  const int sets = ctx_.job().timing.input_sets;
  for (const auto &t : w.spec.tensors)
    if (t.is_output) {
      in.cand_out[t.name] = in.pool.tensor(t);
      in.lib_out[t.name] = in.pool.tensor(t);
    }
  const std::vector<KeptInputs> *kept = ctx_.kept_inputs(wi);
  TensorSet workspace;  // one buffer shared by the input sets, zero-filled before each candidate launch
  ctx_.add_workspace(w, in.pool, workspace);
  for (int s = 0; s < sets; ++s) {
    in.cand[s].insert(workspace.begin(), workspace.end());
    const bool reuse = kept && s < static_cast<int>(kept->size());
    for (const auto &t : w.spec.tensors) {
      if (t.is_output) {
        in.cand[s][t.name] = in.cand_out[t.name];
        in.lib[s][t.name] = in.lib_out[t.name];
        in.refs[s][t.name] = reuse ? (*kept)[s].refs.at(t.name) : in.pool.floats(t.elements());
      } else {
        in.cand[s][t.name] = in.lib[s][t.name] = reuse ? (*kept)[s].inputs.at(t.name) : in.pool.tensor(t);
      }
    }
    if (!reuse) {
      ctx_.fill_inputs(w.spec, in.cand[s],
                       mix(ctx_.job().correctness.base_seed ^ mix(0xABCDEFull + wi * 977 + s)));
      ctx_.family()->run_reference(w.spec, in.cand[s], in.refs[s], ctx_.stream());
    }
    ctx_.pack(stage, w, in.cand[s], in.params[s]);
  }
}

std::uint64_t TimingStage::wrong_outputs(const JobWorkload &w, const TimingInputs &in, int set) {
  std::uint64_t bad = 0;
  for (const auto &t : w.spec.tensors)
    if (t.is_output)
      bad += detail::compare_to_reference(in.cand_out.at(t.name).data, t.type, in.refs[set].at(t.name),
                                          t.elements(), t.atol, t.rtol, ctx_.stream())
                 .mismatches;
  return bad;
}

void TimingStage::sample_workload(const JobWorkload &w, TimingInputs &in, TimingRun &run,
                                  TimingSamples &out) {
  const TimingPolicy &tp = run.tp;
  const int sets = tp.input_sets;
  const int reverify_at =
      tp.reverify_random_launch
          ? static_cast<int>(run.rng() % static_cast<std::uint64_t>(std::max(1, tp.min_samples)))
          : -1;
  TimingStopRule stop_rule(tp);
  run.phases.mark("warmup");
  out.loop_start = Clock::now();
  for (int i = 0;; ++i) {
    const int s = i % sets;
    out.last_set = s;
    for (int half = 0; half < 2; ++half) {
      // Alternate who goes first so neither always runs right after the flush of the other.
      const bool candidate_turn = (half == 0) == (i % 2 == 0);
      if (candidate_turn) {
        // Every launch starts from the same state: outputs NaN-poisoned as before every correctness
        // launch, so a kernel cannot tell a timed launch by its previous outputs, and a zeroed
        // workspace. Before the flush and the start event: not timed (the poison's GPU time is recorded).
        PTXB_CUDA(cudaEventRecord(run.ev_poison_start, ctx_.stream()));
        ctx_.poison_outputs(w.spec, in.cand[s]);
        PTXB_CUDA(cudaEventRecord(run.ev_poison_stop, ctx_.stream()));
        ctx_.reset_workspace(in.cand[s]);
      }
      run.flush_l2();
      PTXB_CUDA(cudaEventRecord(run.ev_start, ctx_.stream()));
      if (candidate_turn) {
        time_candidate_launch(w, in, run, out, i, s, reverify_at);
      } else {
        if (tp.library_preroll) {  // see TimingPolicy::library_preroll
          ctx_.family()->run_library(in.lib[s], in.lib_out, ctx_.stream());
          run.flush_l2();
          PTXB_CUDA(cudaEventRecord(run.ev_start, ctx_.stream()));
        }
        ctx_.family()->run_library(in.lib[s], in.lib_out, ctx_.stream());
        PTXB_CUDA(cudaEventRecord(run.ev_stop, ctx_.stream()));
        PTXB_CUDA(cudaEventSynchronize(run.ev_stop));
        out.lib_ms.push_back(run.elapsed_ms());
        run.cool_down(out.lib_ms.back());
      }
    }
    // One candidate and one library sample per iteration: the rule sees the same pairs as out.
    stop_rule.add(out.cand_ms.back(), out.lib_ms.back(), seconds_since(out.loop_start));
    if (stop_rule.should_stop()) {
      out.stopped_by = stop_rule.stopped_by().value_or(protocol::TimingStop::max_seconds);
      break;
    }
  }
}

void TimingStage::time_candidate_launch(const JobWorkload &w, TimingInputs &in, TimingRun &run,
                                        TimingSamples &out, int i, int s, int reverify_at) {
  const CUresult r = ctx_.kernel().launch(w.launch, in.params[s], ctx_.stream());
  if (r != CUDA_SUCCESS)
    ctx_.fatal(run.stage, detail::is_sticky(r) ? Status::runtime_error : Status::launch_error,
               "timed launch failed: " + detail::describe(r) + " (" + ctx_.launch_context(w, "timing") + ")");
  PTXB_CUDA(cudaEventRecord(run.ev_stop, ctx_.stream()));
  ctx_.wait_candidate(run.stage, w, "timed launch " + std::to_string(i + 1));
  out.cand_ms.push_back(run.elapsed_ms());
  out.poison_ms.push_back(TimingRun::elapsed_ms(run.ev_poison_start, run.ev_poison_stop));  // done by now
  run.cool_down(out.cand_ms.back());
  if (i != reverify_at) return;
  // The output of a random timed launch must still be right (no caching across calls).
  const std::uint64_t bad = wrong_outputs(w, in, s);
  out.reverify.random = protocol::ReverifiedLaunch{i + 1, s, bad};
  if (bad) {
    run.suspicious = true;
    run.diagnostics.push_back(diag("workload " + w.spec.name + ": the output of timed launch " +
                                   std::to_string(i + 1) + " (input set " + std::to_string(s) + ") had " +
                                   std::to_string(bad) +
                                   " wrong elements although the correctness trials passed"));
  }
}

protocol::TimingWorkload TimingStage::workload_timing(const JobWorkload &w, const TimingSamples &samples,
                                                      double workload_clock, TimingRun &run) {
  const std::vector<double> &cand_ms = samples.cand_ms, &lib_ms = samples.lib_ms;
  const double cmed = median_of(cand_ms), lmed = median_of(lib_ms);
  ctx_.note_timed_launch(cmed);
  const ElemType in_type = [&] {
    for (const auto &t : w.spec.tensors)
      if (!t.is_output) return t.type;
    return ElemType::bf16;
  }();
  const detail::PeakRates peak = detail::peak_rates(device_rates(ctx_.device().facts), in_type);
  const double floor_ms = detail::sol_floor_ms(w.spec.flops, w.spec.bytes, peak);
  const std::vector<double> ratios = paired_ratios(cand_ms, lib_ms);
  // See TimingPolicy::paired_min_samples.
  const double speedup = run.tp.paired_min_samples > 0 ? median_of(ratios) : (cmed > 0 ? lmed / cmed : 0);
  const RatioInterval interval = ratio_interval_95(ratios);
  if (samples.stopped_by == protocol::TimingStop::far_from_library)
    run.diagnostics.push_back(diag("workload " + w.spec.name + ": speedup " + fmt_num(speedup) +
                                       "x (95% interval " + fmt_num(interval.lo) + "-" +
                                       fmt_num(interval.hi) + "x from " + std::to_string(ratios.size()) +
                                       " timed pairs); sampling stopped early "
                                       "because the kernel is far slower than the library, so this figure is "
                                       "only as precise as that interval",
                                   "note"));
  if (cmed < run.tp.sol_slack * floor_ms) {
    run.suspicious = true;
    run.diagnostics.push_back(
        diag("workload " + w.spec.name + ": " + fmt_num(cmed) + " ms is below the speed-of-light floor of " +
             fmt_num(floor_ms) + " ms (peak " + fmt_num(peak.flops_per_s / 1e12) + " TFLOP/s, " +
             fmt_num(peak.bytes_per_s / 1e9) + " GB/s): the kernel cannot have done the work"));
  }
  protocol::TimingWorkload t;
  t.name = w.spec.name;
  t.candidate_ms = cmed;
  t.candidate_spread = rel_spread(cand_ms);
  t.library_ms = lmed;
  t.library_spread = rel_spread(lib_ms);
  t.speedup = speedup;
  t.candidate_tflops = cmed > 0 ? w.spec.flops / (cmed * 1e9) : 0;
  t.library_tflops = lmed > 0 ? w.spec.flops / (lmed * 1e9) : 0;
  if (std::isfinite(floor_ms)) t.sol_floor_ms = floor_ms;  // unknown peak rates: null, as before
  t.candidate_median_ci = median_ci_rel(cand_ms, run.tp.autocorrelated_ci);
  t.library_median_ci = median_ci_rel(lib_ms, run.tp.autocorrelated_ci);
  t.speedup_ratio_ci = median_ci_rel(ratios, run.tp.autocorrelated_ci);
  t.speedup_ci95 = {interval.lo, interval.hi};
  t.warmup_launches = samples.warmup_launches;
  t.lag1_autocorrelation = {lag1_autocorrelation(cand_ms), lag1_autocorrelation(lib_ms),
                            lag1_autocorrelation(ratios)};
  t.speedup_of_medians = cmed > 0 ? lmed / cmed : 0;
  t.stopped_by = samples.stopped_by;
  t.sampling_seconds = seconds_since(samples.loop_start);
  t.samples = cand_ms.size();
  t.library_samples = lib_ms.size();
  t.reverified = samples.reverify;
  t.inputs_mutated = samples.inputs_mutated;
  t.output_poison_ms = median_of(samples.poison_ms);
  if (workload_clock > 0) t.sm_clock_mhz_after = workload_clock;
  t.flops = w.spec.flops;
  t.bytes = w.spec.bytes;
  t.peak_tflops = peak.flops_per_s / 1e12;
  t.peak_bandwidth_gbs = peak.bytes_per_s / 1e9;
  if (run.tp.record_samples) {
    t.candidate_samples_ms = cand_ms;
    t.library_samples_ms = lib_ms;
  }
  return t;
}

protocol::StageResult TimingStage::timing_result(const TimingRun &run, double wall_seconds) const {
  protocol::TimingFigures figures = run.figures;
  protocol::set_speedup_summary(figures);
  if (run.sm_clock > 0) figures.sm_clock_mhz = run.sm_clock;
  figures.l2_flush_bytes = run.scratch_bytes;
  figures.phase_seconds = run.phases.seconds.get<std::map<std::string, double>>();
  std::string summary = "speedup " + fmt_num(figures.geomean_speedup) + "x geomean (min " +
                        fmt_num(figures.min_speedup) + "x) over " +
                        (figures.library.name.empty() ? std::string("library") : figures.library.name);
  if (run.suspicious) {
    for (const auto &d : run.diagnostics)
      if (d.value("severity", "") != "note") {
        summary = d["text"].get<std::string>();
        break;
      }
  } else if (figures.far_from_library()) {
    summary += " (far below the library: sampling stopped once the 95% interval showed it)";
  }
  return stage_json(run.suspicious ? Status::suspicious : Status::ok, summary, run.diagnostics, figures,
                    wall_seconds);
}

}  // namespace ptxbench::worker::detail
