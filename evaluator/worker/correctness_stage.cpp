// The correctness stage: every workload's trials against the fp32 reference, guard regions, input
// checksums and a determinism relaunch.
#include "evaluator/worker/detail/stage_runner.hpp"

#include <algorithm>
#include <cmath>

namespace ptxbench::worker::detail {

bool Worker::correctness_stage() {
  const auto start = Clock::now();
  PhaseSeconds phases{device_.stream};
  json workloads = json::array(), diagnostics = json::array();
  bool all_correct = true, all_deterministic = true, stopped_early = false;
  const bool sanitize = job_.mode == JobMode::sanitize;
  std::size_t workloads_skipped = 0;
  for (std::size_t wi = 0; wi < job_.workloads.size(); ++wi) {
    if (stopped_early) {
      ++workloads_skipped;
      continue;
    }
    const JobWorkload &w = job_.workloads[wi];
    prepare("correctness", w);
    BufferPool pool(job_.correctness.guard_bytes, device_.stream);
    TensorSet tensors;
    ReferenceSet reference;
    std::map<std::string, void *> snapshots;
    for (const auto &t : w.spec.tensors) {
      tensors[t.name] = pool.tensor(t);
      if (t.is_output) {
        reference[t.name] = pool.floats(t.elements());
        snapshots[t.name] = pool.raw(t.bytes());
      }
    }
    detail::PackedParams params;
    pack("correctness", w, tensors, params);
    phases.mark("buffers");

    json worst_first = nullptr;
    double max_abs = 0, max_rel = 0;
    std::uint64_t mismatches = 0, nans = 0, unwritten = 0, damage = 0;
    bool mutated = false, deterministic = true;
    int passed = 0, trials_run = 0;
    const int trials = sanitize ? 1 : job_.correctness.trials;
    for (int trial = 0; trial < trials && !stopped_early; ++trial) {
      ++trials_run;
      const std::uint64_t seed = mix(job_.correctness.base_seed ^ mix(wi * 1000003ull + trial));
      fill_inputs(w.spec, tensors, seed);
      phases.mark("fill");
      family_->run_reference(w.spec, tensors, reference, device_.stream);
      phases.mark("reference");
      if (!sanitize) keep_for_timing(wi, trial, w.spec, tensors, reference);
      poison_outputs(w.spec, tensors);
      const std::uint64_t before = input_checksum(w.spec, tensors);
      phases.mark("checks");
      const auto launch_start = Clock::now();
      launch_and_wait("correctness", w, params, "trial " + std::to_string(trial + 1));
      // Sizes the instrumented launch's deadline and budget when the kernel is never timed.
      correctness_launch_ms_ = std::max(correctness_launch_ms_, 1e3 * seconds_since(launch_start));
      phases.mark("candidate");
      bool trial_ok = true;
      for (const auto &t : w.spec.tensors) {
        if (!t.is_output) continue;
        const detail::CompareStats s =
            detail::compare_to_reference(tensors.at(t.name).data, t.type, reference.at(t.name), t.elements(),
                                         t.atol, t.rtol, device_.stream);
        max_abs = std::max(max_abs, s.max_abs_error);
        max_rel = std::max(max_rel, s.max_rel_error);
        mismatches += s.mismatches;
        nans += s.nan_count;
        unwritten += s.unwritten_count;
        if (s.mismatches) {
          trial_ok = false;
          if (worst_first.is_null())
            worst_first = {{"tensor", t.name},
                           {"index", unflatten(s.first_mismatch, t.shape)},
                           {"got", std::isnan(s.first_got) ? json("NaN") : json(s.first_got)},
                           {"expected", s.first_expected},
                           {"trial", trial + 1},
                           {"unwritten", s.unwritten_count > 0 && std::isnan(s.first_got)}};
        }
      }
      for (const auto &[name, t] : tensors) damage += guard_damage(t, device_.stream);
      if (input_checksum(w.spec, tensors) != before) mutated = true;
      if (damage || mutated) trial_ok = false;
      // The first failing trial decides the verdict; the remaining trials (and workloads) would only
      // add counts, so they are skipped unless the settings ask for all of them.
      if (!trial_ok && !job_.correctness.all_trials && !sanitize) stopped_early = true;
      // A second identical launch must give the same bits (races, uninitialized reads).
      if (trial == 0 && job_.correctness.check_determinism && !sanitize && !stopped_early) {
        for (const auto &t : w.spec.tensors)
          if (t.is_output)
            PTXB_CUDA(cudaMemcpyAsync(snapshots[t.name], tensors.at(t.name).data, t.bytes(),
                                      cudaMemcpyDeviceToDevice, device_.stream));
        poison_outputs(w.spec, tensors);
        launch_and_wait("correctness", w, params, "determinism relaunch");
        for (const auto &t : w.spec.tensors)
          if (t.is_output && detail::count_bit_differences(snapshots[t.name], tensors.at(t.name).data, t.type,
                                                           t.elements(), device_.stream) != 0)
            deterministic = false;
      }
      passed += trial_ok;
      phases.mark("checks");
    }
    const bool ok = passed == trials && trials_run == trials;
    all_correct = all_correct && ok;
    all_deterministic = all_deterministic && deterministic;
    std::uint64_t elements = 0;
    for (const auto &t : w.spec.tensors)
      if (t.is_output) elements += static_cast<std::uint64_t>(t.elements());
    workloads.push_back({{"name", w.spec.name},
                         {"trials", trials_run},
                         {"trials_planned", trials},
                         {"passed", passed},
                         {"max_abs_error", max_abs},
                         {"max_rel_error", max_rel},
                         {"mismatches", mismatches},
                         {"first_mismatch", worst_first},
                         {"nan_count", nans},
                         {"unwritten_count", unwritten},
                         {"guard_damage", damage},
                         {"inputs_mutated", mutated},
                         {"deterministic", deterministic},
                         {"output_elements", elements}});
    if (!ok) {
      std::string text = "workload " + w.spec.name + ": " + std::to_string(passed) + " of " +
                         std::to_string(trials_run) + " trials passed";
      if (trials_run < trials)
        text +=
            " (stopped at the first failing trial; " + std::to_string(trials - trials_run) + " more skipped)";
      if (mismatches) {
        text += "; " + std::to_string(mismatches) + " mismatching elements over all trials (of " +
                std::to_string(elements) + " per trial)";
        if (!worst_first.is_null()) {
          const auto &tensor_spec = *w.spec.find_tensor(worst_first["tensor"].get<std::string>());
          text += "; first at " + worst_first["tensor"].get<std::string>() +
                  coord_text(worst_first["index"].get<std::vector<std::int64_t>>()) + ": got " +
                  worst_first["got"].dump() + ", expected " + fmt_num(worst_first["expected"].get<double>()) +
                  " (tolerance " + fmt_num(tensor_spec.atol) + " + " + fmt_num(tensor_spec.rtol) +
                  "·|expected|)";
        }
      }
      if (nans) text += "; " + std::to_string(nans) + " NaN values";
      if (unwritten)
        text += "; " + std::to_string(unwritten) + " elements never written (still the NaN poison)";
      if (damage)
        text += "; " + std::to_string(damage) + " bytes written outside the buffers (guard regions)";
      if (mutated) text += "; the kernel modified its input tensors";
      diagnostics.push_back(diag(text));
    } else if (!deterministic) {
      diagnostics.push_back(diag("workload " + w.spec.name +
                                 ": a second identical launch gave different bits (a race between threads or "
                                 "blocks, or a read of memory nothing wrote)"));
    }
  }
  Status status = Status::ok;
  std::string summary = "correct on every workload";
  if (!all_correct) {
    status = Status::incorrect;
    summary = diagnostics.empty() ? "incorrect" : diagnostics[0]["text"].get<std::string>();
  } else if (!all_deterministic) {
    status = Status::nondeterministic;
    summary = diagnostics[0]["text"].get<std::string>();
  } else {
    summary = "correct on " + std::to_string(job_.workloads.size()) + " workloads x " +
              std::to_string(sanitize ? 1 : job_.correctness.trials) + " trials";
  }
  phases.mark("buffers");  // freeing them
  json figures = {{"workloads", workloads},
                  {"base_seed", job_.correctness.base_seed},
                  {"stopped_early", stopped_early},
                  {"workloads_skipped", workloads_skipped},
                  {"slowest_launch_ms", correctness_launch_ms_},
                  {"phase_seconds", phases.seconds}};
  set_stage("correctness", stage_json(status, summary, diagnostics, figures, seconds_since(start)));
  return status == Status::ok;
}

void Worker::keep_for_timing(std::size_t wi, int trial, const WorkloadSpec &spec, const TensorSet &tensors,
                             const ReferenceSet &reference) {
  if (!job_.timing.reuse_correctness_inputs || trial >= job_.timing.input_sets || !job_.wants("timing"))
    return;
  std::vector<KeptInputs> &sets = kept_[wi];
  if (static_cast<int>(sets.size()) != trial) return;  // an earlier trial could not be kept
  std::size_t bytes = 0;
  for (const auto &t : spec.tensors)
    bytes += t.is_output ? static_cast<std::size_t>(t.elements()) * sizeof(float) : t.bytes();
  std::size_t free_bytes = 0, total_bytes = 0;
  PTXB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < bytes + (std::size_t{2} << 30)) return;
  if (!kept_pool_) kept_pool_ = std::make_unique<BufferPool>(256, device_.stream);
  KeptInputs k;
  for (const auto &t : spec.tensors) {
    if (t.is_output) {
      k.refs[t.name] = kept_pool_->floats(t.elements());
      PTXB_CUDA(cudaMemcpyAsync(k.refs[t.name], reference.at(t.name),
                                static_cast<std::size_t>(t.elements()) * sizeof(float),
                                cudaMemcpyDeviceToDevice, device_.stream));
    } else {
      k.inputs[t.name] = kept_pool_->tensor(t);
      PTXB_CUDA(cudaMemcpyAsync(k.inputs[t.name].data, tensors.at(t.name).data, t.bytes(),
                                cudaMemcpyDeviceToDevice, device_.stream));
    }
  }
  sets.push_back(std::move(k));
}

}  // namespace ptxbench::worker::detail
