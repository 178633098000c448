// A finished turn becomes one typed trace record (traces::TurnRecord), appended to
// trajectories.jsonl; the trajectory then goes back to its endpoint's queue or ends.
#include <fmt/core.h>

#include "agent/conversation.hpp"
#include "agent/detail/clocks.hpp"
#include "agent/detail/runner_state.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"
#include "agent/runner.hpp"

namespace ptxbench::agent {

using detail::thread_cpu_ns;
using detail::TrajectoryState;

namespace {

traces::TokenUsage usage_record(const llm::Usage &u, bool with_reasoning) {
  traces::TokenUsage out;
  out.prompt_tokens = u.prompt_tokens;
  out.completion_tokens = u.completion_tokens;
  if (with_reasoning) out.reasoning_tokens = u.reasoning_tokens;
  out.estimated = u.estimated;
  if (with_reasoning && u.estimated) out.estimate_reason = u.estimate_reason;
  return out;
}

traces::ResponseRecord response_record(const llm::ChatResponse &r) {
  return {r.content,  r.reasoning,      r.finish_reason, usage_record(r.usage, true),
          r.attempts, r.latency_seconds};
}

traces::CandidateRecord candidate_record(const evaluator::ParsedResponse &p, const evaluator::Verdict &v) {
  return {p.language == evaluator::KernelLanguage::ptx ? "ptx" : "cuda", p.kernel_source, p.manifest_text,
          v.kernel_hash};
}

traces::RepairOf repair_record(const RepairSeed &seed, int repair_sample) {
  traces::RepairOf r;
  r.seed_id = seed.id;
  r.student_run_id = seed.student_run_id;
  r.student_run_dir = seed.student_run_dir;
  r.student_model = seed.student_model;
  r.student_trajectory_id = seed.student_trajectory_id;
  r.student_turn = seed.student_turn;
  r.category = seed.category;
  r.feedback_source = seed.feedback_source;
  r.seed_messages = static_cast<int>(seed.conversation.size());
  r.seed_sample = repair_sample;
  return r;
}

std::optional<traces::SynthesizedReasoning> synthesized_record(const detail::TurnJob &job) {
  traces::SynthesizedReasoning s;
  s.instruction = job.explanation_instruction;
  if (job.explanation) {
    const auto &x = *job.explanation;
    s.content = x.content;
    s.finish_reason = x.finish_reason;
    s.usage = usage_record(x.usage, false);
    return s;
  }
  if (job.explanation_error) {
    s.error = job.explanation_error->message;
    return s;
  }
  return std::nullopt;
}

}  // namespace

std::string Runner::Impl::feedback_for(const TurnJob &job, const evaluator::Verdict *verdict) const {
  const auto &resp = *job.response;
  // A cut-off answer is the model's outcome, but "no kernel" or "bad manifest" would send it looking for
  // a mistake it did not make.
  const auto max_tokens = plan.config.sampling_of(plan.arms[job.trajectory->plan.arm]).max_tokens;
  if (resp.finish_reason == "length" &&
      (verdict == nullptr || verdict->parse.status != evaluator::Status::ok)) {
    return plan.arm_prompts[job.trajectory->plan.arm].feedback_unusable_response(fmt::format(
        "your answer was cut off at max_tokens ({}) before it was complete; send a shorter one: the kernel "
        "and the manifest, with little prose around them",
        max_tokens ? fmt::format("{} tokens", *max_tokens) : std::string("the server's limit")));
  }
  const PromptBuilder &prompts = plan.arm_prompts[job.trajectory->plan.arm];
  if (verdict == nullptr) return prompts.feedback_unusable_response("the response could not be evaluated");
  const auto &c = *job.compiled;
  const FeedbackSources sources{c.response.kernel_source, c.ptx,
                                c.response.language == evaluator::KernelLanguage::cuda};
  return prompts.feedback(*job.trajectory->plan.task, *verdict, &sources);
}

traces::TurnRecord Runner::Impl::turn_record(const TurnJob &job, const std::string &stop,
                                             const std::string &feedback) const {
  const TrajectoryState &t = *job.trajectory;
  const evaluator::Verdict *verdict = job.compiled ? &job.compiled->verdict : nullptr;
  traces::TurnRecord record;
  record.format_version = traces::kFormatVersion;
  record.run_id = plan.run_id;
  record.model = plan.config.endpoints[t.plan.endpoint].name;
  record.task_id = t.plan.task->id;
  record.sample = t.plan.sample;
  record.turn = job.turn;
  record.trajectory_id = t.plan.id;
  const Variant &arm = plan.arms[t.plan.arm];
  if (!plan.config.variants.empty()) record.variant = arm.name;
  nlohmann::json packs = nlohmann::json::array();
  for (const auto &name : arm.packs)
    packs.push_back(plan.arm_prompts[t.plan.arm].packs().at(name).identity());
  record.reference = {{"target_notes", arm.target_notes}, {"packs", packs}};
  record.messages.emplace();
  for (const auto &m : job.messages) record.messages->push_back({m.role, m.content});
  if (job.response) record.response = response_record(*job.response);
  if (job.error) {
    record.request_error =
        traces::RequestErrorRecord{std::string(llm::to_string(job.error->kind)), job.error->http_status,
                                   job.error->message, job.error->attempts};
  }
  if (verdict != nullptr) {
    if (verdict->parse.status == evaluator::Status::ok)
      record.candidate = candidate_record(job.compiled->response, *verdict);
    record.verdict = verdict->to_json();
  }
  record.feedback = feedback;
  record.stop_reason = stop;
  if (t.plan.seed) record.repair_of = repair_record(*t.plan.seed, t.plan.repair_sample);
  record.synthesized_reasoning = synthesized_record(job);
  record.gpu = job.gpu;
  record.seed = job.seed;
  traces::TurnTimings timings;
  timings.request_s = job.request_s;
  timings.cpu_stages_s = job.cpu_stages_s;
  timings.gpu_stage_s = job.gpu_stage_s;
  timings.client_cpu_ms = static_cast<double>(job.client_ns) / 1e6;
  timings.evaluator_cpu_ms = static_cast<double>(job.evaluator_ns) / 1e6;
  // Time to first token: on a streamed request, the first streamed byte of the successful attempt
  // (servers send the first token in the first event); a plain request's first byte is the whole answer.
  if (job.response && plan.config.endpoints[t.plan.endpoint].stream)
    timings.ttft_s = job.response->first_byte_seconds;
  record.timings = timings;
  record.started_at = job.started_at;
  record.finished_at = detail::iso8601_utc_now();
  return record;
}

bool Runner::Impl::append_record(const traces::TurnRecord &record) {
  std::lock_guard lock(write_mutex);
  if (write_failed) return false;
  auto ok = writer->append(record);
  if (ok) return true;
  write_failed = true;
  scheduler.request_stop(
      RunEnd::write_failed,
      fmt::format("{}\nThe run stopped; free space (or raise the file size limit) and run `ptxbench "
                  "resume {}`.",
                  ok.error(), plan.dir.string()));
  return false;
}

void Runner::Impl::finalize(JobPtr job) {
  const std::int64_t c0 = thread_cpu_ns();
  TrajectoryState &t = *job->trajectory;
  const evaluator::Verdict *verdict = job->compiled ? &job->compiled->verdict : nullptr;
  const std::string stop = scheduler.stop_reason_for(*job, verdict);
  const std::string feedback = stop.empty() ? feedback_for(*job, verdict) : std::string();
  std::string status = job->error ? (job->forced_stop.empty() ? "request_failed" : "not_sent") : "?";
  if (verdict != nullptr) status = std::string(evaluator::to_string(verdict->status));

  traces::TurnRecord record = turn_record(*job, stop, feedback);
  record.timings->orchestrator_cpu_ms =
      static_cast<double>(job->orchestrator_ns + (thread_cpu_ns() - c0)) / 1e6;
  const bool written = append_record(record);
  client_ns += job->client_ns;
  evaluator_ns += job->evaluator_ns;
  if (!written) {
    orchestrator_ns += job->orchestrator_ns + (thread_cpu_ns() - c0);
    scheduler.abandon(std::move(job));
    return;
  }
  ++turns_recorded;
  if (stop == "request_failed") ++request_failures;
  const int skipped_turns = stop.empty() ? 0 : plan.config.turns_of(plan.arms[t.plan.arm]) - job->turn - 1;
  progress->on_turn(t.plan.endpoint, status, skipped_turns,
                    fmt::format("[{}] {} turn {}: {}{}", detail::iso8601_utc_now().substr(11, 8), t.plan.id,
                                job->turn, status, stop.empty() ? "" : " (" + stop + ")"));
  scheduler.advance(*job, stop, feedback);
  // The run's total includes the append and this bookkeeping (the record could not: it was already written).
  orchestrator_ns += job->orchestrator_ns + (thread_cpu_ns() - c0);
  scheduler.release_turn();
}

}  // namespace ptxbench::agent
