// The turn recorder: run.json, each finished turn as one typed trace record (traces::TurnRecord) appended
// to trajectories.jsonl, the session's figures and the progress display.
#include "agent/detail/turn_recorder.hpp"

#include <unistd.h>

#include <fmt/core.h>

#include "agent/conversation.hpp"
#include "agent/detail/clocks.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"
#include "agent/runner.hpp"
#include "util/files.hpp"

namespace ptxbench::agent::detail {

namespace fs = std::filesystem;

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

std::optional<traces::SynthesizedReasoning> synthesized_record(const TurnJob &job) {
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

ProgressDisplay::Style progress_style(const RunOptions &options) {
  switch (options.progress) {
    case ProgressMode::automatic:
      return ::isatty(::fileno(options.log)) ? ProgressDisplay::Style::redraw : ProgressDisplay::Style::lines;
    case ProgressMode::redraw:
      return ProgressDisplay::Style::redraw;
    case ProgressMode::lines:
      return ProgressDisplay::Style::lines;
    case ProgressMode::quiet:
      return ProgressDisplay::Style::quiet;
  }
  return ProgressDisplay::Style::lines;
}

std::vector<std::string> endpoint_names(const RunConfig &config) {
  std::vector<std::string> names;
  for (const auto &e : config.endpoints) names.push_back(e.name);
  return names;
}

/// Per endpoint, the turns its trajectories may run (the progress display's totals).
std::vector<int> turn_totals(const RunPlan &plan) {
  std::vector<int> totals(plan.config.endpoints.size(), 0);
  for (const auto &t : plan.trajectories) totals[t.endpoint] += plan.config.turns_of(plan.arms[t.arm]);
  return totals;
}

util::Expected<void> write_run_json(const fs::path &dir, const traces::RunRecord &record) {
  const fs::path path = dir / "run.json";
  if (auto w = util::write_file_atomic(path, record.to_json().dump(2) + "\n"); !w)
    return util::unexpected(fmt::format("cannot write {}: {}", path.string(), w.error()));
  return {};
}

}  // namespace

util::Expected<std::unique_ptr<TurnRecorder>> TurnRecorder::open(const RunPlan &plan, Scheduler &scheduler,
                                                                 traces::RunRecord run_record,
                                                                 const PreviousCounts &previous) {
  if (auto ok = write_run_json(plan.dir, run_record); !ok) return util::unexpected(ok.error());
  return std::unique_ptr<TurnRecorder>(new TurnRecorder(plan, scheduler, std::move(run_record), previous));
}

TurnRecorder::TurnRecorder(const RunPlan &plan, Scheduler &scheduler, traces::RunRecord run_record,
                           const PreviousCounts &previous)
    : plan_(plan),
      scheduler_(scheduler),
      run_record_(std::move(run_record)),
      writer_(plan.dir),
      progress_(progress_style(plan.options), plan.options.log, endpoint_names(plan.config),
                turn_totals(plan)),
      retried_request_failures_(previous.retried_request_failures) {
  for (std::size_t e = 0; e < plan.config.endpoints.size(); ++e)
    progress_.add_previous(e, previous.done[e], previous.statuses[e]);
}

std::string TurnRecorder::feedback_for(const TurnJob &job, const evaluator::Verdict *verdict) const {
  const auto &resp = *job.response;
  // A cut-off answer is the model's outcome, but "no kernel" or "bad manifest" would send it looking for
  // a mistake it did not make.
  const auto max_tokens = plan_.config.sampling_of(plan_.arms[job.trajectory->plan.arm]).max_tokens;
  if (resp.finish_reason == "length" &&
      (verdict == nullptr || verdict->parse.status != evaluator::Status::ok)) {
    return plan_.arm_prompts[job.trajectory->plan.arm].feedback_unusable_response(fmt::format(
        "your answer was cut off at max_tokens ({}) before it was complete; send a shorter one: the kernel "
        "and the manifest, with little prose around them",
        max_tokens ? fmt::format("{} tokens", *max_tokens) : std::string("the server's limit")));
  }
  const PromptBuilder &prompts = plan_.arm_prompts[job.trajectory->plan.arm];
  if (verdict == nullptr) return prompts.feedback_unusable_response("the response could not be evaluated");
  const auto &c = *job.compiled;
  const FeedbackSources sources{c.response.kernel_source, c.ptx,
                                c.response.language == evaluator::KernelLanguage::cuda};
  return prompts.feedback(*job.trajectory->plan.task, *verdict, &sources);
}

traces::TurnRecord TurnRecorder::turn_record(const TurnJob &job, const std::string &stop,
                                             const std::string &feedback) const {
  const TrajectoryState &t = *job.trajectory;
  const evaluator::Verdict *verdict = job.compiled ? &job.compiled->verdict : nullptr;
  traces::TurnRecord record;
  record.format_version = traces::kFormatVersion;
  record.run_id = plan_.run_id;
  record.model = plan_.config.endpoints[t.plan.endpoint].name;
  record.task_id = t.plan.task->id;
  record.sample = t.plan.sample;
  record.turn = job.turn;
  record.trajectory_id = t.plan.id;
  const Variant &arm = plan_.arms[t.plan.arm];
  if (!plan_.config.variants.empty()) record.variant = arm.name;
  nlohmann::json packs = nlohmann::json::array();
  for (const auto &name : arm.packs)
    packs.push_back(plan_.arm_prompts[t.plan.arm].packs().at(name).identity());
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
  if (job.response && plan_.config.endpoints[t.plan.endpoint].stream)
    timings.ttft_s = job.response->first_byte_seconds;
  record.timings = timings;
  record.started_at = job.started_at;
  record.finished_at = iso8601_utc_now();
  return record;
}

bool TurnRecorder::append(const traces::TurnRecord &record) {
  std::lock_guard lock(write_mutex_);
  if (write_failed_) return false;
  auto ok = writer_.append(record);
  if (ok) return true;
  write_failed_ = true;
  scheduler_.request_stop(
      RunEnd::write_failed,
      fmt::format("{}\nThe run stopped; free space (or raise the file size limit) and run `ptxbench "
                  "resume {}`.",
                  ok.error(), plan_.dir.string()));
  return false;
}

bool TurnRecorder::record(const TurnJob &job, const std::string &stop, const std::string &feedback,
                          std::int64_t started_ns) {
  const TrajectoryPlan &t = job.trajectory->plan;
  const evaluator::Verdict *verdict = job.compiled ? &job.compiled->verdict : nullptr;
  std::string status = job.error ? (job.forced_stop.empty() ? "request_failed" : "not_sent") : "?";
  if (verdict != nullptr) status = std::string(evaluator::to_string(verdict->status));

  traces::TurnRecord record = turn_record(job, stop, feedback);
  record.timings->orchestrator_cpu_ms =
      static_cast<double>(job.orchestrator_ns + (thread_cpu_ns() - started_ns)) / 1e6;
  const bool written = append(record);
  client_ns_ += job.client_ns;
  evaluator_ns_ += job.evaluator_ns;
  if (!written) {
    orchestrator_ns_ += job.orchestrator_ns + (thread_cpu_ns() - started_ns);
    return false;
  }
  ++turns_recorded_;
  if (stop == "request_failed") ++request_failures_;
  const int skipped_turns = stop.empty() ? 0 : plan_.config.turns_of(plan_.arms[t.arm]) - job.turn - 1;
  progress_.on_turn(t.endpoint, status, skipped_turns,
                    fmt::format("[{}] {} turn {}: {}{}", iso8601_utc_now().substr(11, 8), t.id, job.turn,
                                status, stop.empty() ? "" : " (" + stop + ")"));
  return true;
}

void TurnRecorder::show_error_once(const std::string &endpoint, const llm::ChatError &error) {
  // Byte counts and timings differ between otherwise identical failures: they do not make an error new.
  std::string key = endpoint + "\n" + llm::to_string(error.kind) + "\n";
  for (char c : error.message)
    if (c < '0' || c > '9') key.push_back(c);
  {
    std::lock_guard lock(errors_mutex_);
    if (!errors_shown_.insert(key).second) return;
  }
  progress_.message(fmt::format("error: endpoint '{}': {} (shown once; every failed turn is in the trace)",
                                endpoint, error.message));
}

void TurnRecorder::add_gpu_busy(int ordinal, double seconds) {
  std::lock_guard lock(busy_mutex_);
  gpu_busy_s_[ordinal] += seconds;
}

void TurnRecorder::report(RunResult &result) {
  result.turns_recorded = turns_recorded_;
  result.request_failures = request_failures_;
  result.retried_request_failures = retried_request_failures_;
  result.orchestrator_cpu_ms = static_cast<double>(orchestrator_ns_.load()) / 1e6;
  result.client_cpu_ms = static_cast<double>(client_ns_.load()) / 1e6;
  result.evaluator_cpu_ms = static_cast<double>(evaluator_ns_.load()) / 1e6;
  result.verdicts_made = verdicts_made_.load();
  result.verdicts_reused = verdicts_reused_.load();
  traces::ThroughputRecord throughput;
  for (int g : plan_.gpus) {
    const double b = result.wall_seconds > 0 ? gpu_busy_s_[g] / result.wall_seconds : 0;
    result.gpu_busy_fraction[g] = b;
    throughput.gpu_busy_fraction[std::to_string(g)] = b;
  }
  const double gpu_hours = result.wall_seconds / 3600.0 * static_cast<double>(plan_.gpus.size());
  if (plan_.gpu_enabled && gpu_hours > 0)
    result.verdicts_per_gpu_hour = (result.verdicts_made + result.verdicts_reused) / gpu_hours;
  // run.json keeps the latest session's figures (a resume overwrites them).
  throughput.wall_seconds = result.wall_seconds;
  throughput.verdicts_made = result.verdicts_made;
  throughput.verdicts_reused = result.verdicts_reused;
  if (plan_.gpu_enabled) throughput.verdicts_per_gpu_hour = result.verdicts_per_gpu_hour;
  run_record_.throughput = std::move(throughput);
  (void)write_run_json(plan_.dir, run_record_);
}

}  // namespace ptxbench::agent::detail
