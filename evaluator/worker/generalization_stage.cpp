// The generalization stage: the task's hidden workloads (never shown to the model), checked with the same
// trials, poison, guards and determinism relaunch as the shown ones, and optionally timed. It runs last,
// after the shown workloads' stages are written, so a kernel that faults or hangs on a hidden shape keeps
// its verdict on the shown ones; the fault is this stage's (the evaluator reads `in_progress`).
#include "evaluator/worker/detail/generalization_stage.hpp"

#include "evaluator/protocol/generalization.hpp"
#include "evaluator/worker/family.hpp"

namespace ptxbench::worker::detail {

void GeneralizationStage::run(bool correct) {
  const auto start = Clock::now();
  const std::size_t total = ctx_.job().hidden_workloads.size();
  if (!correct) {
    ctx_.set_stage(
        "generalization",
        stage_json(Status::skipped, "not checked: the kernel is not correct on the shown workloads"));
    return;
  }
  PhaseSeconds phases{ctx_.stream()};
  protocol::GeneralizationFigures figures;
  figures.total = total;
  json diagnostics = json::array();
  std::size_t passed = 0, skipped = 0;
  for (std::size_t i = 0; i < total; ++i) {
    const JobWorkload &w = ctx_.job().hidden_workloads[i];
    if (std::string why = ctx_.family()->check_workload(w.spec); !why.empty()) {
      figures.workloads.push_back(
          {.name = w.spec.name, .kind = protocol::HiddenKind::skipped, .reason = why});
      ++skipped;
      continue;  // not a failure of the kernel: this worker cannot evaluate that shape
    }
    // Written before the workload runs: a fault or a kill from here on is charged to this workload.
    figures.in_progress = w.spec.name;
    ctx_.set_stage("generalization", stage_json(Status::ok, "checking hidden workloads", diagnostics,
                                                json(figures), seconds_since(start)));
    bool stopped = false;
    const CorrectnessStage::WorkloadCheck c =
        correctness_.check_workload("generalization", w, StageContext::kHiddenIndexBase + i, phases, stopped);
    const bool ok = c.ok() && c.deterministic;
    protocol::HiddenWorkload row{.name = w.spec.name,
                                 .kind = ok        ? protocol::HiddenKind::ok
                                         : !c.ok() ? protocol::HiddenKind::incorrect
                                                   : protocol::HiddenKind::nondeterministic,
                                 .check = correctness_.workload_row(w, c)};
    // A hidden shape must not be given away: its mismatch pattern without sizes, indices or counts.
    if (c.pattern) row.check->mismatch_pattern = protocol::coarse_pattern(*c.pattern);
    if (ok && ctx_.job().time_hidden) {
      TimingStage::TimingRun run(ctx_.job().timing, ctx_.device().facts, ctx_.stream(),
                                 ctx_.job().correctness.base_seed, "generalization");
      if (timing_.time_workload(w, StageContext::kHiddenIndexBase + i, run) && !run.figures.workloads.empty())
        row.timing = run.figures.workloads.back();
      else
        row.timing_skipped = run.library_error.empty() ? std::string("not timed") : run.library_error;
    }
    if (!ok) {
      diagnostics.push_back(diag(!c.ok() ? correctness_.correctness_failure_text(w, c)
                                         : "workload " + w.spec.name +
                                               ": a second identical launch gave different bits (a race)"));
    }
    passed += ok;
    figures.workloads.push_back(std::move(row));
    figures.passed = passed;
  }
  figures.in_progress.reset();
  const std::size_t checked = total - skipped;
  figures.total = checked;
  figures.phase_seconds = phases.seconds.get<std::map<std::string, double>>();
  const std::string summary = std::to_string(passed) + " of " + std::to_string(checked) +
                              " hidden workloads correct" +
                              (passed == checked ? "" : ": " + std::string(diagnostics[0]["text"]));
  ctx_.set_stage("generalization", stage_json(passed == checked ? Status::ok : Status::incorrect, summary,
                                              diagnostics, json(figures), seconds_since(start)));
}

}  // namespace ptxbench::worker::detail
