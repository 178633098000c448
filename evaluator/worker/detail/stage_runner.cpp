// The worker's running order over the stages.
#include "evaluator/worker/detail/stage_runner.hpp"

#include "evaluator/worker/detail/correctness_stage.hpp"
#include "evaluator/worker/detail/execution_stage.hpp"
#include "evaluator/worker/detail/generalization_stage.hpp"
#include "evaluator/worker/detail/profile_metrics.hpp"
#include "evaluator/worker/detail/profile_stage.hpp"
#include "evaluator/worker/detail/range_profiler.hpp"
#include "evaluator/worker/detail/timing_stage.hpp"
#include "evaluator/worker/family.hpp"

namespace ptxbench::worker::detail {

Worker::Worker(Job job, std::string result_path, Device device, json worker_figures)
    : ctx_(std::move(job), std::move(result_path), std::move(device), std::move(worker_figures)) {}

int Worker::run() {
  const Job &job = ctx_.job();
  const auto fail_all = [&](Status status, const std::string &why) {
    for (const char *s : protocol::kGpuStageNames)
      if (job.wants(s))
        ctx_.result().stages[s] = stage_json(s == std::string("correctness") ? status : Status::skipped, why);
    ctx_.finish();
    return exit_code::kFinished;
  };
  if (!ctx_.family())
    return fail_all(Status::skipped, "no GPU evaluation for family '" + job.family + "' with reference '" +
                                         job.reference + "' in this worker");
  for (const auto &w : job.workloads)
    if (std::string why = ctx_.family()->check_workload(w.spec); !why.empty())
      return fail_all(Status::skipped, "workload " + w.spec.name + ": " + why);
  std::string cubin;
  try {
    cubin = read_all(job.cubin_path);
  } catch (const WorkerError &e) {
    return fail_all(Status::skipped, e.what());
  }
  if (std::string why = ctx_.kernel().load(cubin, job.entry); !why.empty())
    ctx_.fatal("correctness", Status::launch_error, why);
  ctx_.result().worker["clock"]["stages_start"] = monotonic_seconds();

  // The correctness and timing stages' objects serve the generalization stage too (the hidden
  // workloads' checks share the borderline extra-trial budget with the shown ones).
  CorrectnessStage correctness(ctx_);
  TimingStage timing(ctx_);
  bool correct = true;
  if (job.wants("correctness")) correct = correctness.run();
  // The range profiler's host-side set-up (counter availability, config image) before the execution
  // stage's SASS-metrics session, never after it: made after that session, CUPTI's PC sampler takes no
  // samples in this process. A no-op when the pre-started worker made it while waiting for the job; a
  // refusal is kept with the set-up and reported by the profile stage.
  if (correct && job.wants("profile")) {
    const auto t = Clock::now();
    bool made_now = false;
    (void)prepare_range_profiler(ctx_.device().ctx, ctx_.device().facts.ordinal,
                                 profile_metric_names(job.profile.metrics), &made_now);
    if (made_now) ctx_.result().worker["phase_seconds"]["profiler_setup_in_job"] = seconds_since(t);
  }
  if (job.wants("timing")) {
    if (correct)
      timing.run();
    else
      ctx_.set_stage("timing", stage_json(Status::skipped, "not timed: the outputs were not correct"));
  }
  if (job.wants("execution")) ExecutionStage(ctx_).run(correct);
  if (job.wants("generalization") && !job.hidden_workloads.empty())
    GeneralizationStage(ctx_, correctness, timing).run(correct);
  if (job.wants("profile")) ProfileStage(ctx_).run(correct);
  ctx_.finish();
  return exit_code::kFinished;
}

}  // namespace ptxbench::worker::detail
