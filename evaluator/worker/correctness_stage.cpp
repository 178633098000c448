// The correctness stage: every workload's trials against the fp32 reference, guard regions, input
// checksums and a determinism relaunch.
#include "evaluator/worker/detail/correctness_stage.hpp"

#include "evaluator/protocol/mismatch.hpp"
#include "evaluator/worker/detail/mismatch_pattern.hpp"
#include "evaluator/worker/family.hpp"

#include <algorithm>
#include <cmath>

namespace ptxbench::worker::detail {

/// One workload's buffers: its tensors (with guard regions), the fp32 reference and a snapshot of each
/// output for the determinism relaunch, and the candidate's packed parameters.
struct CorrectnessStage::CorrectnessBuffers {
  CorrectnessBuffers(std::size_t guard_bytes, cudaStream_t stream) : pool(guard_bytes, stream) {}
  BufferPool pool;
  TensorSet tensors;
  ReferenceSet reference;
  std::map<std::string, void *> snapshots;
  detail::PackedParams params;
};

bool CorrectnessStage::run() {
  const auto start = Clock::now();
  PhaseSeconds phases{ctx_.stream()};
  protocol::CorrectnessFigures figures;
  json diagnostics = json::array();
  bool all_correct = true, all_deterministic = true, stopped_early = false;
  const bool sanitize = ctx_.job().mode == JobMode::sanitize;
  std::size_t workloads_skipped = 0;
  std::vector<std::string> near_edge;  // borderline workloads' notes, for an ok summary
  for (std::size_t wi = 0; wi < ctx_.job().workloads.size(); ++wi) {
    if (stopped_early) {
      ++workloads_skipped;
      continue;
    }
    const JobWorkload &w = ctx_.job().workloads[wi];
    const WorkloadCheck c = check_workload("correctness", w, wi, phases, stopped_early);
    all_correct = all_correct && c.ok();
    all_deterministic = all_deterministic && c.deterministic;
    figures.workloads.push_back(workload_row(w, c));
    if (c.margin.borderline) near_edge.push_back("workload " + w.spec.name + ": " + margin_text(c));
    if (!c.ok()) {
      diagnostics.push_back(diag(correctness_failure_text(w, c)));
    } else if (!c.deterministic) {
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
    summary = "correct on " + std::to_string(ctx_.job().workloads.size()) + " workloads x " +
              std::to_string(sanitize ? 1 : ctx_.job().correctness.trials) + " trials";
    for (const auto &note : near_edge) {
      summary += "; " + note;
      diagnostics.push_back(diag(note, "warning"));
    }
  }
  phases.mark("buffers");  // freeing them
  figures.base_seed = ctx_.job().correctness.base_seed;
  figures.borderline = !near_edge.empty();
  figures.stopped_early = stopped_early;
  figures.workloads_skipped = workloads_skipped;
  figures.slowest_launch_ms = ctx_.correctness_launch_ms();
  figures.phase_seconds = phases.seconds;
  ctx_.set_stage("correctness",
                 stage_json(status, summary, diagnostics, json(figures), seconds_since(start)));
  return status == Status::ok;
}

protocol::CorrectnessWorkload CorrectnessStage::workload_row(const JobWorkload &w,
                                                             const WorkloadCheck &c) const {
  protocol::CorrectnessWorkload row;
  row.name = w.spec.name;
  row.trials = c.trials_run;
  row.trials_planned = c.trials;
  row.passed = c.passed;
  row.max_abs_error = c.max_abs;
  row.max_rel_error = c.max_rel;
  row.mismatches = c.mismatches;
  row.first_mismatch = c.worst_first;
  row.mismatch_pattern = c.pattern;
  row.nan_count = c.nans;
  row.unwritten_count = c.unwritten;
  row.guard_damage = c.damage;
  row.inputs_mutated = c.mutated;
  row.deterministic = c.deterministic;
  row.margin = c.margin;
  row.output_elements = output_elements(w.spec);
  return row;
}

CorrectnessStage::WorkloadCheck CorrectnessStage::check_workload(const char *stage, const JobWorkload &w,
                                                                 std::size_t wi, PhaseSeconds &phases,
                                                                 bool &stopped_early) {
  const bool sanitize = ctx_.job().mode == JobMode::sanitize;
  ctx_.prepare(stage, w);
  CorrectnessBuffers b(ctx_.job().correctness.guard_bytes, ctx_.stream());
  for (const auto &t : w.spec.tensors) {
    b.tensors[t.name] = b.pool.tensor(t);
    if (t.is_output) {
      b.reference[t.name] = b.pool.floats(t.elements());
      b.snapshots[t.name] = b.pool.raw(t.bytes());
    }
  }
  ctx_.add_workspace(w, b.pool, b.tensors);
  ctx_.pack(stage, w, b.tensors, b.params);
  phases.mark("buffers");

  WorkloadCheck c;
  c.trials = sanitize ? 1 : ctx_.job().correctness.trials;
  const protocol::BorderlinePolicy &edge = ctx_.job().correctness.borderline;
  const auto near_edge = [&] {
    return !sanitize && protocol::is_borderline(c.margin, c.other_failure(), edge);
  };
  bool failed_near_edge = false;
  double trial_seconds = 0;
  for (int trial = 0; trial < c.trials && !stopped_early; ++trial) {
    ++c.trials_run;
    const auto trial_start = Clock::now();
    const bool trial_ok = run_trial(stage, w, wi, trial, b, phases, c);
    trial_seconds = seconds_since(trial_start);
    // The first failing trial decides the verdict; the remaining trials (and workloads) would only
    // add counts, so they are skipped unless the settings ask for all of them. One that failed only by
    // values near the tolerance runs on: its failure rate is what the verdict reports.
    if (!trial_ok && !ctx_.job().correctness.all_trials && !sanitize) {
      if (near_edge())
        failed_near_edge = true;
      else
        stopped_early = true;
    }
    // A second identical launch must give the same bits (races, uninitialized reads).
    if (trial == 0 && ctx_.job().correctness.check_determinism && !sanitize && !stopped_early &&
        !same_bits_on_relaunch(stage, w, b))
      c.deterministic = false;
    c.passed += trial_ok;
    phases.mark("checks");
  }
  // Near the tolerance: more trials on fresh inputs (seeded like the others) estimate how often one fails.
  c.margin.borderline = !stopped_early && near_edge();
  while (c.margin.borderline) {
    c.margin.extra_stopped_by =
        protocol::extra_trial_stop(c.margin, extra_trial_seconds_, trial_seconds, edge);
    if (!c.margin.extra_stopped_by.empty()) break;
    const auto trial_start = Clock::now();
    ++c.trials_run;
    ++c.margin.extra_trials;
    c.passed += run_trial(stage, w, wi, c.trials_run - 1, b, phases, c);
    trial_seconds = seconds_since(trial_start);
    extra_trial_seconds_ += trial_seconds;
    phases.mark("checks");
    // A guard hit or a NaN in an extra trial is a plain failure: no longer near the edge.
    if (!near_edge()) {
      c.margin.borderline = false;
      c.margin.extra_stopped_by = "left_band";
      break;
    }
  }
  if (failed_near_edge || (!c.ok() && !ctx_.job().correctness.all_trials && !sanitize)) stopped_early = true;
  protocol::count_trials(c.margin, c.trials_run, c.passed);
  return c;
}

bool CorrectnessStage::run_trial(const char *stage, const JobWorkload &w, std::size_t wi, int trial,
                                 CorrectnessBuffers &b, PhaseSeconds &phases, WorkloadCheck &c) {
  const std::uint64_t seed = mix(ctx_.job().correctness.base_seed ^ mix(wi * 1000003ull + trial));
  ctx_.fill_inputs(w.spec, b.tensors, seed);
  phases.mark("fill");
  ctx_.family()->run_reference(w.spec, b.tensors, b.reference, ctx_.stream());
  phases.mark("reference");
  if (ctx_.job().mode != JobMode::sanitize) ctx_.keep_for_timing(wi, trial, w.spec, b.tensors, b.reference);
  ctx_.poison_outputs(w.spec, b.tensors);
  ctx_.reset_workspace(b.tensors);
  const std::uint64_t before = ctx_.input_checksum(w.spec, b.tensors);
  phases.mark("checks");
  const auto launch_start = Clock::now();
  ctx_.launch_and_wait(stage, w, b.params, "trial " + std::to_string(trial + 1));
  // Sizes the instrumented launch's deadline and budget when the kernel is never timed.
  ctx_.note_correctness_launch(1e3 * seconds_since(launch_start));
  phases.mark("candidate");
  bool trial_ok = true;
  // The first failing trial's pattern of mismatches (the sample and worst elements cost two more passes
  // over an output only when it has mismatches).
  const bool want_pattern = !c.pattern;
  protocol::MismatchPattern pattern;
  pattern.trial = trial + 1;
  for (const auto &t : w.spec.tensors) {
    if (!t.is_output) continue;
    detail::CompareStats s =
        detail::compare_to_reference(b.tensors.at(t.name).data, t.type, b.reference.at(t.name), t.elements(),
                                     t.atol, t.rtol, ctx_.stream(), want_pattern);
    if (want_pattern)
      pattern.tensors.push_back(detail::analyze_mismatches(t.name, detail::named_dims(w.spec, t),
                                                           s.mismatches, s.nan_count, s.unwritten_count,
                                                           std::move(s.sample), std::move(s.worst)));
    protocol::note_ratio(c.margin, t.name, s.max_error_ratio, trial + 1);
    c.max_abs = std::max(c.max_abs, s.max_abs_error);
    c.max_rel = std::max(c.max_rel, s.max_rel_error);
    c.mismatches += s.mismatches;
    c.nans += s.nan_count;
    c.unwritten += s.unwritten_count;
    if (s.mismatches) {
      trial_ok = false;
      if (!c.worst_first)
        c.worst_first =
            protocol::FirstMismatch{t.name,      unflatten(s.first_mismatch, t.shape),
                                    s.first_got, s.first_expected,
                                    trial + 1,   s.unwritten_count > 0 && std::isnan(s.first_got)};
    }
  }
  if (want_pattern && !trial_ok) c.pattern = std::move(pattern);
  for (const auto &[name, t] : b.tensors) c.damage += guard_damage(t, ctx_.stream());
  if (ctx_.input_checksum(w.spec, b.tensors) != before) c.mutated = true;
  if (c.damage || c.mutated) trial_ok = false;
  return trial_ok;
}

bool CorrectnessStage::same_bits_on_relaunch(const char *stage, const JobWorkload &w, CorrectnessBuffers &b) {
  for (const auto &t : w.spec.tensors)
    if (t.is_output)
      PTXB_CUDA(cudaMemcpyAsync(b.snapshots[t.name], b.tensors.at(t.name).data, t.bytes(),
                                cudaMemcpyDeviceToDevice, ctx_.stream()));
  ctx_.poison_outputs(w.spec, b.tensors);
  ctx_.reset_workspace(b.tensors);
  ctx_.launch_and_wait(stage, w, b.params, "determinism relaunch");
  bool same = true;
  for (const auto &t : w.spec.tensors)
    if (t.is_output && detail::count_bit_differences(b.snapshots[t.name], b.tensors.at(t.name).data, t.type,
                                                     t.elements(), ctx_.stream()) != 0)
      same = false;
  return same;
}

std::string CorrectnessStage::correctness_failure_text(const JobWorkload &w, const WorkloadCheck &c) const {
  const std::uint64_t elements = output_elements(w.spec);
  std::string text = "workload " + w.spec.name + ": " + std::to_string(c.passed) + " of " +
                     std::to_string(c.trials_run) + " trials passed";
  if (c.trials_run < c.trials)
    text +=
        " (stopped at the first failing trial; " + std::to_string(c.trials - c.trials_run) + " more skipped)";
  if (c.mismatches) {
    text += "; " + std::to_string(c.mismatches) + " mismatching elements over all trials (of " +
            std::to_string(elements) + " per trial)";
    if (const auto &first = c.worst_first) {
      const auto &tensor_spec = *w.spec.find_tensor(first->tensor);
      // got as the figures write it: a number, "NaN" or null (infinite)
      text += "; first at " + first->tensor + coord_text(first->index) + ": got " +
              (std::isnan(first->got) ? std::string("\"NaN\"") : json(first->got).dump()) + ", expected " +
              fmt_num(first->expected) + " (tolerance " + fmt_num(tensor_spec.atol) + " + " +
              fmt_num(tensor_spec.rtol) + "·|expected|)";
    }
  }
  if (c.margin.borderline) text += "; " + margin_text(c);
  if (c.nans) text += "; " + std::to_string(c.nans) + " NaN values";
  if (c.unwritten)
    text += "; " + std::to_string(c.unwritten) + " elements never written (still the NaN poison)";
  if (c.damage)
    text += "; " + std::to_string(c.damage) + " bytes written outside the buffers (guard regions)";
  if (c.mutated) text += "; the kernel modified its input tensors";
  return text;
}

std::string CorrectnessStage::margin_text(const WorkloadCheck &c) {
  const protocol::WorkloadMargin &m = c.margin;
  std::string text = "borderline: the largest error is " + fmt_num(m.max_error_ratio) + "x the tolerance";
  if (m.extra_trials > 0)
    text += "; " + std::to_string(m.extra_trials) + " extra trials on fresh inputs, " +
            std::to_string(m.trials_failed) + " of " + std::to_string(m.trials_run) + " trials failed";
  return text;
}

}  // namespace ptxbench::worker::detail
