// The runner's loops: requests per endpoint, CPU stages, GPU stages per GPU, and explanations of
// verified repairs. Each takes a turn from the scheduler and hands it on through it; finalize ends it.
#include <fmt/core.h>

#include "agent/conversation.hpp"
#include "agent/detail/clocks.hpp"
#include "agent/detail/runner_state.hpp"
#include "agent/repair_selection.hpp"
#include "agent/runner.hpp"

namespace ptxbench::agent {

using detail::thread_cpu_ns;
using detail::TrajectoryState;
using Stage = detail::Scheduler::Stage;

void Runner::Impl::guarded(const char *stage, const std::function<void()> &body) {
  // A bug in a stage must not take the other trajectories down silently: stop
  // the run (resumable) and say what happened.
  try {
    body();
  } catch (const std::exception &e) {
    scheduler.request_stop(RunEnd::interrupted,
                           fmt::format("internal error in the {} stage: {} (please report; the run is "
                                       "resumable)",
                                       stage, e.what()));
  }
}

void Runner::Impl::request_loop(std::size_t e) {
  while (TrajectoryState *t = scheduler.next_trajectory(e)) guarded("request", [&] { run_turn(e, *t); });
}

void Runner::Impl::run_turn(std::size_t e, TrajectoryState &t) {
  const std::int64_t c0 = thread_cpu_ns();
  auto job = std::make_unique<TurnJob>();
  job->trajectory = &t;
  job->turn = t.next_turn;
  job->started_at = detail::iso8601_utc_now();
  const auto &[system, task] = plan.task_prompts.at({t.plan.arm, t.plan.task->id});
  job->messages =
      t.plan.seed ? build_seeded_messages(plan.config.history_of(plan.arms[t.plan.arm]),
                                          t.plan.seed->conversation, t.history)
                  : build_messages(plan.config.history_of(plan.arms[t.plan.arm]), system, task, t.history);
  if (scheduler.endpoint_dead(e)) {
    job->error = scheduler.dead_error(e);
    job->forced_stop = "request_failed";
  } else if (scheduler.run_budget_used()) {
    job->error = llm::ChatError{
        llm::ChatErrorKind::budget,
        0,
        fmt::format("not sent: the run's token budget ({} tokens) is used up", plan.config.budgets.per_run),
        0,
        {}};
    job->forced_stop = "run_budget";
  }
  if (job->error) {
    job->orchestrator_ns = thread_cpu_ns() - c0;
    finalize(std::move(job));
    return;
  }
  llm::ChatRequest request;
  request.messages = job->messages;
  request.sampling = plan.config.sampling_of(plan.arms[t.plan.arm]);
  request.sampling.n = 1;
  // Samples of one trajectory set must differ: a fixed seed would make them byte-identical.
  if (request.sampling.seed) *request.sampling.seed += t.plan.sample;
  job->seed = request.sampling.seed;
  request.task_id = t.plan.task->id;
  request.sample_index = t.plan.sample;
  request.turn_index = job->turn;
  const std::int64_t c1 = thread_cpu_ns();
  job->orchestrator_ns += c1 - c0;
  const auto t0 = std::chrono::steady_clock::now();
  auto result = plan.clients[e]->complete(request);
  job->request_s = detail::seconds_since(t0);
  const std::int64_t c2 = thread_cpu_ns();
  job->client_ns = c2 - c1;
  if (!result) {
    request_failed(e, std::move(job), result.error());
    return;
  }
  scheduler.request_succeeded(e);
  job->response = std::move(result.value());
  const auto &u = job->response->usage;
  scheduler.add_tokens(t, u.prompt_tokens + u.completion_tokens);
  job->orchestrator_ns += thread_cpu_ns() - c2;
  scheduler.hand_on(Stage::cpu, std::move(job));
}

void Runner::Impl::request_failed(std::size_t e, JobPtr job, const llm::ChatError &error) {
  const std::int64_t c0 = thread_cpu_ns();
  if (error.kind == llm::ChatErrorKind::cancelled || scheduler.stopping()) {
    scheduler.abandon(std::move(job));  // redone on resume
    return;
  }
  const llm::EndpointConfig &ec = plan.config.endpoints[e];
  job->error = error;
  recorder->show_error_once(ec.name, error);
  scheduler.request_failed(e, error, [&](int failures) {
    recorder->progress().message(
        fmt::format("warning: endpoint '{}' failed {} requests in a row ({}); its remaining "
                    "trajectories are marked failed",
                    ec.name, failures, error.message));
  });
  job->orchestrator_ns += thread_cpu_ns() - c0;
  finalize(std::move(job));
}

void Runner::Impl::cpu_loop() {
  while (auto next = scheduler.next_job(Stage::cpu)) {
    JobPtr job = std::move(*next);
    guarded("compile", [&] {
      if (scheduler.stopping()) {
        scheduler.abandon(std::move(job));  // redone on resume
        return;
      }
      const tasks::Task &task = *job->trajectory->plan.task;
      const auto t0 = std::chrono::steady_clock::now();
      const std::int64_t c0 = thread_cpu_ns();
      // The response is parsed once: the verdict cache's key, the stages and the record all take this.
      const evaluator::EvaluatorSettings settings = plan.settings_for(job->trajectory->plan.arm);
      evaluator::ParsedCandidate parsed = evaluator::parse_candidate(task, job->response->content, settings);
      if (reuse_verdict(job, parsed, settings)) return;
      if (plan.service) {
        evaluate_remotely(std::move(job), std::move(parsed.response));
        return;
      }
      job->compiled.emplace(
          plan.services.cpu_stages(task, job->response->content, std::move(parsed), settings));
      const std::int64_t c1 = thread_cpu_ns();
      job->evaluator_ns = c1 - c0;
      job->cpu_stages_s = detail::seconds_since(t0);
      if (plan.gpu_enabled && job->compiled->ready_for_gpu()) {
        job->orchestrator_ns += thread_cpu_ns() - c1;
        scheduler.hand_on(Stage::gpu, std::move(job));
        return;
      }
      if (!plan.gpu_enabled && job->compiled->ready_for_gpu()) {
        auto &v = job->compiled->verdict;
        v.skip_gpu_stages(plan.gpu_skip_reason, evaluator::Verdict::GpuSkip::shown_workloads);
        v.finalize_status();
      }
      remember_verdict(*job);
      job->orchestrator_ns += thread_cpu_ns() - c1;
      finish_turn(std::move(job));
    });
  }
}

void Runner::Impl::evaluate_remotely(JobPtr job, evaluator::ParsedResponse parsed) {
  const tasks::Task &task = *job->trajectory->plan.task;
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t c0 = thread_cpu_ns();
  auto verdict =
      plan.service->evaluate(task.id, job->response->content, plan.settings_for(job->trajectory->plan.arm));
  job->client_ns += thread_cpu_ns() - c0;
  if (!verdict) {
    if (verdict.error().kind != detail::ServiceFailure::Kind::cancelled && !scheduler.stopping()) {
      scheduler.request_stop(RunEnd::evaluator_failed,
                             fmt::format("the evaluator service (evaluator.url) failed on {} turn {}: {}",
                                         job->trajectory->plan.id, job->turn, verdict.error().message));
    }
    scheduler.abandon(std::move(job));  // redone on resume
    return;
  }
  // The candidate as sent (for the record and the feedback's source lines); the verdict as the service made
  // it.
  evaluator::CompiledCandidate c;
  c.response = std::move(parsed);  // empty when it did not parse
  if (c.response.language == evaluator::KernelLanguage::ptx) c.ptx = c.response.kernel_source;
  c.verdict = std::move(*verdict);
  job->compiled.emplace(std::move(c));
  job->cpu_stages_s = detail::seconds_since(t0);
  remember_verdict(*job);
  finish_turn(std::move(job));
}

bool Runner::Impl::reuse_verdict(JobPtr &job, evaluator::ParsedCandidate &parsed,
                                 const evaluator::EvaluatorSettings &settings) {
  if (!verdict_cache || !plan.config.reuse_verdicts) return false;
  const tasks::Task &task = *job->trajectory->plan.task;
  job->verdict_key = verdict_cache->key(task, parsed, settings).value_or("");
  if (job->verdict_key.empty()) return false;
  auto hit = verdict_cache->get(job->verdict_key);
  if (!hit) return false;
  // The candidate as sent (for the record); the verdict as made the first time.
  evaluator::CompiledCandidate c;
  c.response = std::move(parsed.response);
  c.verdict = std::move(*hit);
  job->compiled.emplace(std::move(c));
  recorder->verdict_reused();
  finish_turn(std::move(job));
  return true;
}

void Runner::Impl::remember_verdict(const TurnJob &job) {
  recorder->verdict_made();
  if (!verdict_cache || job.verdict_key.empty() || !job.compiled) return;
  verdict_cache->put(job.verdict_key, job.compiled->verdict,
                     fmt::format("{} turn {}", job.trajectory->plan.id, job.turn));
}

void Runner::Impl::gpu_loop(int ordinal) {
  evaluator::EvaluatorSettings settings = plan.config.evaluator;
  settings.device = ordinal;
  while (auto next = scheduler.next_job(Stage::gpu)) {
    JobPtr job = std::move(*next);
    guarded("GPU", [&] {
      // A stopped run ends with the GPU stage in progress; the turns queued behind it (seconds each) are
      // redone on resume, so a time limit's stop takes one verdict, not the whole queue.
      if (scheduler.stopping()) {
        scheduler.abandon(std::move(job));
        return;
      }
      const auto t0 = std::chrono::steady_clock::now();
      evaluator::EvaluatorSettings job_settings = plan.settings_for(job->trajectory->plan.arm);
      job_settings.device = settings.device;
      plan.services.gpu_stages(*job->compiled, *job->trajectory->plan.task, job_settings);
      job->gpu_stage_s = detail::seconds_since(t0);
      job->gpu = ordinal;
      recorder->add_gpu_busy(ordinal, job->gpu_stage_s);
      remember_verdict(*job);
      finish_turn(std::move(job));
    });
  }
}

void Runner::Impl::finish_turn(JobPtr job) {
  const evaluator::Verdict *verdict = job->compiled ? &job->compiled->verdict : nullptr;
  const bool wants_explanation = plan.config.repairs && plan.config.repairs->synthesize_reasoning &&
                                 job->trajectory->plan.seed && job->response && verdict != nullptr &&
                                 plan.config.stop.reached(verdict->axes) &&
                                 job->response->reasoning.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!wants_explanation) {
    finalize(std::move(job));
    return;
  }
  // The explanation is one more request: it waits on the request side, not on a CPU or GPU thread.
  scheduler.hand_on(Stage::explanation, std::move(job));
}

void Runner::Impl::explain_loop() {
  while (auto next = scheduler.next_job(Stage::explanation)) {
    JobPtr job = std::move(*next);
    guarded("explanation", [&] {
      TrajectoryState &t = *job->trajectory;
      if (scheduler.stopping()) {
        scheduler.abandon(std::move(job));  // redone on resume
        return;
      }
      llm::ChatRequest request;
      request.messages =
          explanation_request(*t.plan.seed, job->response->content, &job->explanation_instruction);
      request.sampling = plan.config.sampling_of(plan.arms[t.plan.arm]);
      request.sampling.n = 1;
      if (request.sampling.seed) *request.sampling.seed += t.plan.sample;
      request.task_id = t.plan.task->id;
      request.sample_index = t.plan.sample;
      request.turn_index = job->turn;
      const std::int64_t c0 = thread_cpu_ns();
      auto result = plan.clients[t.plan.endpoint]->complete(request);
      job->client_ns += thread_cpu_ns() - c0;
      if (!result) {
        if (result.error().kind == llm::ChatErrorKind::cancelled || scheduler.stopping()) {
          scheduler.abandon(std::move(job));
          return;
        }
        job->explanation_error = result.error();  // the repair stands; it is kept without reasoning
      } else {
        const auto &u = result->usage;
        scheduler.add_tokens(t, u.prompt_tokens + u.completion_tokens);
        job->explanation = std::move(*result);
      }
      finalize(std::move(job));
    });
  }
}

void Runner::Impl::finalize(JobPtr job) {
  const std::int64_t c0 = thread_cpu_ns();
  const evaluator::Verdict *verdict = job->compiled ? &job->compiled->verdict : nullptr;
  const std::string stop = scheduler.stop_reason_for(*job, verdict);
  const std::string feedback = stop.empty() ? recorder->feedback_for(*job, verdict) : std::string();
  if (!recorder->record(*job, stop, feedback, c0)) {
    scheduler.abandon(std::move(job));  // not written: the run stops; redone on resume
    return;
  }
  scheduler.advance(*job, stop, feedback);
  // The run's total includes the append and this bookkeeping (the record could not: it was already written).
  recorder->add_orchestrator_ns(job->orchestrator_ns + (thread_cpu_ns() - c0));
  scheduler.release_turn();
}

}  // namespace ptxbench::agent
