// The timing stage: candidate and library interleaved on cold L2, sampled until the median is settled.
#include "evaluator/worker/detail/stage_runner.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "evaluator/worker/detail/nvml_clock.hpp"
#include "evaluator/worker/detail/timing_stats.hpp"

namespace ptxbench::worker::detail {

void Worker::timing_stage() {
  const auto start = Clock::now();
  PhaseSeconds phases{device_.stream};
  const TimingPolicy &tp = job_.timing;
  json workloads = json::array(), diagnostics = json::array();
  json library = json::object();
  std::vector<double> speedups;
  bool suspicious = false;
  double sm_clock = 0;
  void *scratch = nullptr;
  const std::size_t scratch_bytes = static_cast<std::size_t>(
      tp.l2_flush_factor * static_cast<double>(std::max<std::int64_t>(device_.facts.l2_bytes, 1 << 20)));
  PTXB_CUDA(cudaMalloc(&scratch, scratch_bytes));
  cudaEvent_t ev_start, ev_stop;
  PTXB_CUDA(cudaEventCreate(&ev_start));
  PTXB_CUDA(cudaEventCreate(&ev_stop));
  std::mt19937_64 rng(job_.correctness.base_seed ^ 0x7151ull);
  int flush_counter = 0;
  auto flush_l2 = [&] {
    PTXB_CUDA(cudaMemsetAsync(scratch, (++flush_counter) & 0xFF, scratch_bytes, device_.stream));
  };
  auto elapsed_ms = [&] {
    float ms = 0;
    PTXB_CUDA(cudaEventElapsedTime(&ms, ev_start, ev_stop));
    return static_cast<double>(ms);
  };
  // The stream is idle here (every sample is waited for), so the GPU idles while we sleep.
  auto cool_down = [&](double sample_ms) {
    const double idle_ms = std::min(tp.cooldown_ratio * sample_ms, tp.cooldown_max_ms);
    if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
  };

  for (std::size_t wi = 0; wi < job_.workloads.size(); ++wi) {
    const JobWorkload &w = job_.workloads[wi];
    prepare("timing", w);
    BufferPool pool(256, device_.stream);
    const int sets = tp.input_sets;
    std::vector<TensorSet> cand(sets), lib(sets);
    std::vector<ReferenceSet> refs(sets);
    std::vector<detail::PackedParams> params(sets);
    TensorSet cand_out, lib_out;
    for (const auto &t : w.spec.tensors)
      if (t.is_output) {
        cand_out[t.name] = pool.tensor(t);
        lib_out[t.name] = pool.tensor(t);
      }
    const std::vector<KeptInputs> *kept = kept_.contains(wi) ? &kept_.at(wi) : nullptr;
    for (int s = 0; s < sets; ++s) {
      const bool reuse = kept && s < static_cast<int>(kept->size());
      for (const auto &t : w.spec.tensors) {
        if (t.is_output) {
          cand[s][t.name] = cand_out[t.name];
          lib[s][t.name] = lib_out[t.name];
          refs[s][t.name] = reuse ? (*kept)[s].refs.at(t.name) : pool.floats(t.elements());
        } else {
          cand[s][t.name] = lib[s][t.name] = reuse ? (*kept)[s].inputs.at(t.name) : pool.tensor(t);
        }
      }
      if (!reuse) {
        fill_inputs(w.spec, cand[s], mix(job_.correctness.base_seed ^ mix(0xABCDEFull + wi * 977 + s)));
        family_->run_reference(w.spec, cand[s], refs[s], device_.stream);
      }
      pack("timing", w, cand[s], params[s]);
    }
    phases.mark("inputs");
    LibraryInfo info;
    try {
      TensorSet lib_inputs = lib[0];
      info = family_->prepare_library(w.spec, lib_inputs, lib_out, device_.stream);
    } catch (const WorkerError &e) {
      if (e.kind() == "runtime_error") throw;
      cudaFree(scratch);
      set_stage("timing",
                stage_json(Status::skipped, std::string("the reference library could not run: ") + e.what(),
                           json::array({diag(e.what(), "warning")})));
      return;
    }
    library = {{"name", info.name}, {"version", info.version}, {"algo", info.algo}};
    phases.mark("library_selection");

    for (int i = 0; i < tp.warmup_launches; ++i) {
      launch_and_wait("timing", w, params[i % sets], "warm-up");
      family_->run_library(lib[i % sets], lib_out, device_.stream);
    }
    PTXB_CUDA(cudaStreamSynchronize(device_.stream));

    const int reverify_at =
        tp.reverify_random_launch
            ? static_cast<int>(rng() % static_cast<std::uint64_t>(std::max(1, tp.min_samples)))
            : -1;
    std::vector<double> cand_ms, lib_ms;
    json reverify = nullptr;
    int last_set =
        0;  // input set of the last timed candidate launch (its output is re-checked after the loop)
    // Output elements of the candidate's latest launch outside tolerance against input set `set`'s
    // reference.
    const auto wrong_outputs = [&](int set) {
      std::uint64_t bad = 0;
      for (const auto &t : w.spec.tensors)
        if (t.is_output)
          bad += detail::compare_to_reference(cand_out.at(t.name).data, t.type, refs[set].at(t.name),
                                              t.elements(), t.atol, t.rtol, device_.stream)
                     .mismatches;
      return bad;
    };
    phases.mark("warmup");
    const auto loop_start = Clock::now();
    for (int i = 0;; ++i) {
      const int s = i % sets;
      last_set = s;
      for (int half = 0; half < 2; ++half) {
        // Alternate who goes first so neither always runs right after the flush of the other.
        const bool candidate_turn = (half == 0) == (i % 2 == 0);
        flush_l2();
        PTXB_CUDA(cudaEventRecord(ev_start, device_.stream));
        if (candidate_turn) {
          const CUresult r = kernel_.launch(w.launch, params[s], device_.stream);
          if (r != CUDA_SUCCESS)
            fatal("timing", detail::is_sticky(r) ? Status::runtime_error : Status::launch_error,
                  "timed launch failed: " + detail::describe(r) + " (" + launch_context(w, "timing") + ")");
          PTXB_CUDA(cudaEventRecord(ev_stop, device_.stream));
          wait_candidate("timing", w, "timed launch " + std::to_string(i + 1));
          cand_ms.push_back(elapsed_ms());
          cool_down(cand_ms.back());
          if (i == reverify_at) {
            // The output of a random timed launch must still be right (no caching across calls).
            const std::uint64_t bad = wrong_outputs(s);
            reverify = {{"launch", i + 1}, {"input_set", s}, {"mismatches", bad}};
            if (bad) {
              suspicious = true;
              diagnostics.push_back(diag("workload " + w.spec.name + ": the output of timed launch " +
                                         std::to_string(i + 1) + " (input set " + std::to_string(s) +
                                         ") had " + std::to_string(bad) +
                                         " wrong elements although the correctness trials passed"));
            }
          }
        } else {
          if (tp.library_preroll) {  // see TimingPolicy::library_preroll
            family_->run_library(lib[s], lib_out, device_.stream);
            flush_l2();
            PTXB_CUDA(cudaEventRecord(ev_start, device_.stream));
          }
          family_->run_library(lib[s], lib_out, device_.stream);
          PTXB_CUDA(cudaEventRecord(ev_stop, device_.stream));
          PTXB_CUDA(cudaEventSynchronize(ev_stop));
          lib_ms.push_back(elapsed_ms());
          cool_down(lib_ms.back());
        }
      }
      const double t = seconds_since(loop_start);
      const bool enough = static_cast<int>(cand_ms.size()) >= tp.min_samples && t >= tp.min_seconds &&
                          median_ci_rel(cand_ms) <= tp.target_rel_spread &&
                          median_ci_rel(lib_ms) <= tp.target_rel_spread;
      if (enough || t >= tp.max_seconds) break;
    }
    phases.mark("sampling");
    if (tp.reverify_random_launch) {
      // Also the LAST timed launch: a kernel that turns wrong (and cheap) only after the random
      // re-check would otherwise keep an inflated speedup.
      const std::uint64_t bad = wrong_outputs(last_set);
      reverify["last_launch"] = {{"launch", cand_ms.size()}, {"input_set", last_set}, {"mismatches", bad}};
      if (bad) {
        suspicious = true;
        diagnostics.push_back(diag("workload " + w.spec.name + ": the output of the last timed launch (" +
                                   std::to_string(cand_ms.size()) + ") had " + std::to_string(bad) +
                                   " wrong elements although the correctness trials passed"));
      }
    }
    double workload_clock = 0;  // SM clock right after this workload's sampling
    if (auto mhz = detail::sm_clock_mhz(device_.facts.pci_bus_id)) sm_clock = workload_clock = *mhz;
    family_->release_library();

    const double cmed = median_of(cand_ms), lmed = median_of(lib_ms);
    slowest_launch_ms_ = std::max(slowest_launch_ms_, cmed);
    const ElemType in_type = [&] {
      for (const auto &t : w.spec.tensors)
        if (!t.is_output) return t.type;
      return ElemType::bf16;
    }();
    const detail::PeakRates peak = detail::peak_rates(device_rates(device_.facts), in_type);
    const double floor_ms = detail::sol_floor_ms(w.spec.flops, w.spec.bytes, peak);
    const double speedup = cmed > 0 ? lmed / cmed : 0;
    speedups.push_back(speedup);
    if (cmed < tp.sol_slack * floor_ms) {
      suspicious = true;
      diagnostics.push_back(diag(
          "workload " + w.spec.name + ": " + fmt_num(cmed) + " ms is below the speed-of-light floor of " +
          fmt_num(floor_ms) + " ms (peak " + fmt_num(peak.flops_per_s / 1e12) + " TFLOP/s, " +
          fmt_num(peak.bytes_per_s / 1e9) + " GB/s): the kernel cannot have done the work"));
    }
    json wj = {{"name", w.spec.name},
               {"candidate_ms", cmed},
               {"candidate_spread", rel_spread(cand_ms)},
               {"library_ms", lmed},
               {"library_spread", rel_spread(lib_ms)},
               {"speedup", speedup},
               {"candidate_tflops", cmed > 0 ? w.spec.flops / (cmed * 1e9) : 0},
               {"library_tflops", lmed > 0 ? w.spec.flops / (lmed * 1e9) : 0},
               {"sol_floor_ms", floor_ms},
               {"candidate_median_ci", median_ci_rel(cand_ms)},
               {"library_median_ci", median_ci_rel(lib_ms)},
               {"sampling_seconds", seconds_since(loop_start)},
               {"samples", cand_ms.size()},
               {"library_samples", lib_ms.size()},
               {"reverified", reverify},
               {"sm_clock_mhz_after", workload_clock > 0 ? json(workload_clock) : json(nullptr)},
               {"flops", w.spec.flops},
               {"bytes", w.spec.bytes}};
    wj.update(peak.to_json());
    workloads.push_back(wj);
  }
  cudaFree(scratch);
  cudaEventDestroy(ev_start);
  cudaEventDestroy(ev_stop);

  double log_sum = 0, min_speedup = speedups.empty() ? 0 : speedups[0];
  for (double s : speedups) {
    log_sum += std::log(std::max(s, 1e-12));
    min_speedup = std::min(min_speedup, s);
  }
  const double geomean = speedups.empty() ? 0 : std::exp(log_sum / static_cast<double>(speedups.size()));
  json figures = {{"workloads", workloads},
                  {"geomean_speedup", geomean},
                  {"min_speedup", min_speedup},
                  {"sm_clock_mhz", sm_clock > 0 ? json(sm_clock) : json(nullptr)},
                  {"library", library},
                  {"l2_flush_bytes", scratch_bytes},
                  {"phase_seconds", phases.seconds}};
  const std::string summary = suspicious
                                  ? diagnostics[0]["text"].get<std::string>()
                                  : "speedup " + fmt_num(geomean) + "x geomean (min " + fmt_num(min_speedup) +
                                        "x) over " + library.value("name", "library");
  set_stage("timing", stage_json(suspicious ? Status::suspicious : Status::ok, summary, diagnostics, figures,
                                 seconds_since(start)));
}

}  // namespace ptxbench::worker::detail
