// TurnRecord <-> JSON. One place spells the record's field names; the writer, the reader and every
// export and report go through it. Reading is defensive (a wrong type reads as absent) because
// records are data from disk, possibly written by another version or cut by hand.
#include <exception>
#include <string_view>

#include "traces/detail/run_view.hpp"
#include "traces/record.hpp"

namespace ptxbench::traces {

namespace {

using Json = nlohmann::json;

// Field reads share the run view's defensive accessors (a wrong type reads as absent).
using detail::bool_field;
using detail::field;
using detail::number_field;
using detail::object_field;
using detail::string_field;

std::string string_or(const Json &j, std::string_view key, std::string fallback = {}) {
  return string_field(j, key).value_or(std::move(fallback));
}

template <class Int>
std::optional<Int> opt_int(const Json &j, std::string_view key) {
  const auto v = detail::int_field(j, key);
  if (!v) return std::nullopt;
  return static_cast<Int>(*v);
}

/// Writes `value` under `key` when present; absent fields stay absent.
template <class T>
void put_if(Json &j, const char *key, const std::optional<T> &value) {
  if (value) j[key] = *value;
}

/// Writes `value` under `key`, or null when absent.
template <class T>
Json or_null(const std::optional<T> &value) {
  return value ? Json(*value) : Json(nullptr);
}

Json usage_json(const TokenUsage &u) {
  Json j = Json::object();
  put_if(j, "prompt_tokens", u.prompt_tokens);
  put_if(j, "completion_tokens", u.completion_tokens);
  put_if(j, "reasoning_tokens", u.reasoning_tokens);
  put_if(j, "estimated", u.estimated);
  put_if(j, "estimate_reason", u.estimate_reason);
  return j;
}

TokenUsage usage_from(const Json &j) {
  TokenUsage u;
  u.prompt_tokens = opt_int<std::int64_t>(j, "prompt_tokens");
  u.completion_tokens = opt_int<std::int64_t>(j, "completion_tokens");
  u.reasoning_tokens = opt_int<std::int64_t>(j, "reasoning_tokens");
  u.estimated = bool_field(j, "estimated");
  u.estimate_reason = string_field(j, "estimate_reason");
  return u;
}

Json response_json(const ResponseRecord &r) {
  return {{"content", r.content},         {"reasoning", r.reasoning}, {"finish_reason", r.finish_reason},
          {"usage", usage_json(r.usage)}, {"attempts", r.attempts},   {"latency_seconds", r.latency_seconds}};
}

ResponseRecord response_from(const Json &j) {
  ResponseRecord r;
  r.content = string_or(j, "content");
  r.reasoning = string_or(j, "reasoning");
  r.finish_reason = string_or(j, "finish_reason");
  if (const Json *u = object_field(j, "usage")) r.usage = usage_from(*u);
  r.attempts = opt_int<int>(j, "attempts").value_or(0);
  r.latency_seconds = number_field(j, "latency_seconds").value_or(0);
  return r;
}

Json timings_json(const TurnTimings &t) {
  Json j = Json::object();
  put_if(j, "request_s", t.request_s);
  put_if(j, "cpu_stages_s", t.cpu_stages_s);
  put_if(j, "gpu_stage_s", t.gpu_stage_s);
  put_if(j, "orchestrator_cpu_ms", t.orchestrator_cpu_ms);
  put_if(j, "client_cpu_ms", t.client_cpu_ms);
  put_if(j, "evaluator_cpu_ms", t.evaluator_cpu_ms);
  j["ttft_s"] = or_null(t.ttft_s);
  return j;
}

TurnTimings timings_from(const Json &j) {
  TurnTimings t;
  t.request_s = number_field(j, "request_s");
  t.cpu_stages_s = number_field(j, "cpu_stages_s");
  t.gpu_stage_s = number_field(j, "gpu_stage_s");
  t.orchestrator_cpu_ms = number_field(j, "orchestrator_cpu_ms");
  t.client_cpu_ms = number_field(j, "client_cpu_ms");
  t.evaluator_cpu_ms = number_field(j, "evaluator_cpu_ms");
  t.ttft_s = number_field(j, "ttft_s");
  return t;
}

Json repair_of_json(const RepairOf &r) {
  return {{"seed_id", r.seed_id},
          {"student_run_id", r.student_run_id},
          {"student_run_dir", r.student_run_dir},
          {"student_model", r.student_model},
          {"student_trajectory_id", r.student_trajectory_id},
          {"student_turn", r.student_turn},
          {"category", r.category},
          {"feedback_source", r.feedback_source},
          {"seed_messages", r.seed_messages},
          {"seed_sample", r.seed_sample}};
}

RepairOf repair_of_from(const Json &j) {
  RepairOf r;
  r.seed_id = string_or(j, "seed_id");
  r.student_run_id = string_or(j, "student_run_id");
  r.student_run_dir = string_or(j, "student_run_dir");
  r.student_model = string_or(j, "student_model");
  r.student_trajectory_id = string_or(j, "student_trajectory_id");
  r.student_turn = opt_int<int>(j, "student_turn").value_or(0);
  r.category = string_or(j, "category");
  r.feedback_source = string_or(j, "feedback_source");
  r.seed_messages = opt_int<int>(j, "seed_messages").value_or(0);
  r.seed_sample = opt_int<int>(j, "seed_sample").value_or(0);
  return r;
}

Json synthesized_json(const SynthesizedReasoning &s) {
  Json j = {{"content", or_null(s.content)}, {"instruction", s.instruction}, {"error", or_null(s.error)}};
  put_if(j, "finish_reason", s.finish_reason);
  if (s.usage) j["usage"] = usage_json(*s.usage);
  return j;
}

SynthesizedReasoning synthesized_from(const Json &j) {
  SynthesizedReasoning s;
  s.content = string_field(j, "content");
  s.instruction = string_or(j, "instruction");
  s.finish_reason = string_field(j, "finish_reason");
  if (const Json *u = object_field(j, "usage")) s.usage = usage_from(*u);
  s.error = string_field(j, "error");
  return s;
}

std::optional<std::vector<RecordedMessage>> messages_from(const Json &j) {
  const Json *messages = field(j, "messages");
  if (!messages || !messages->is_array()) return std::nullopt;
  std::vector<RecordedMessage> out;
  for (const Json &m : *messages) {
    auto role = string_field(m, "role");
    auto content = string_field(m, "content");
    if (!role || !content) return std::nullopt;  // one unreadable message makes the request unreadable
    out.push_back({std::move(*role), std::move(*content)});
  }
  return out;
}

/// The top-level fields TurnRecord reads; any other is kept in `extra`.
constexpr std::string_view kKnownFields[] = {"format_version", "run_id",     "model",
                                             "task_id",        "sample",     "turn",
                                             "trajectory_id",  "variant",    "reference",
                                             "messages",       "response",   "request_error",
                                             "candidate",      "verdict",    "feedback",
                                             "stop_reason",    "timings",    "gpu",
                                             "seed",           "repair_of",  "synthesized_reasoning",
                                             "started_at",     "finished_at"};

bool known_field(std::string_view key) {
  for (auto k : kKnownFields)
    if (k == key) return true;
  return false;
}

}  // namespace

Json RepairOf::to_json() const {
  return repair_of_json(*this);
}

Json TurnRecord::to_json() const {
  Json j = extra.is_object() ? extra : Json::object();
  j["format_version"] = format_version;
  j["run_id"] = run_id;
  j["model"] = model;
  j["task_id"] = task_id;
  j["sample"] = sample;
  j["turn"] = turn;
  j["trajectory_id"] = trajectory_id;
  j["variant"] = or_null(variant);
  if (!reference.is_null()) j["reference"] = reference;
  if (messages) {
    Json list = Json::array();
    for (const auto &m : *messages) list.push_back({{"role", m.role}, {"content", m.content}});
    j["messages"] = std::move(list);
  }
  j["response"] = response ? response_json(*response) : Json(nullptr);
  if (request_error) {
    j["request_error"] = {{"kind", request_error->kind},
                          {"http_status", request_error->http_status},
                          {"message", request_error->message}};
    put_if(j["request_error"], "attempts", request_error->attempts);
  } else {
    j["request_error"] = nullptr;
  }
  j["candidate"] = candidate ? Json{{"language", candidate->language},
                                    {"kernel_source", candidate->kernel_source},
                                    {"manifest_text", candidate->manifest_text},
                                    {"kernel_hash", candidate->kernel_hash}}
                             : Json(nullptr);
  j["verdict"] = verdict;
  j["feedback"] = feedback;
  j["stop_reason"] = stop_reason;
  if (timings) j["timings"] = timings_json(*timings);
  j["gpu"] = or_null(gpu);
  j["seed"] = or_null(seed);
  if (repair_of) j["repair_of"] = repair_of_json(*repair_of);
  if (synthesized_reasoning) j["synthesized_reasoning"] = synthesized_json(*synthesized_reasoning);
  j["started_at"] = started_at;
  j["finished_at"] = finished_at;
  return j;
}

std::optional<protocol::Verdict> TurnRecord::decoded_verdict() const {
  if (!verdict.is_object()) return std::nullopt;
  try {
    return protocol::Verdict::from_json(verdict);
  } catch (const std::exception &) {  // json::exception or protocol::ProtocolError: unreadable, not absent
    return std::nullopt;
  }
}

TurnRecord TurnRecord::from_json(const Json &j) {
  TurnRecord r;
  r.format_version = opt_int<int>(j, "format_version").value_or(0);
  r.run_id = string_or(j, "run_id");
  auto model = string_field(j, "model");
  auto task = string_field(j, "task_id");
  auto sample = opt_int<long long>(j, "sample");
  auto turn = opt_int<long long>(j, "turn");
  r.has_identity = model && task && sample && turn && *sample >= 0 && *sample <= 1'000'000'000 &&
                   *turn >= 0 && *turn <= 100'000;
  r.model = model.value_or("");
  r.task_id = task.value_or("");
  if (sample && *sample >= 0 && *sample <= 1'000'000'000) r.sample = static_cast<int>(*sample);
  if (turn && *turn >= 0 && *turn <= 100'000) r.turn = static_cast<int>(*turn);
  r.trajectory_id = string_or(j, "trajectory_id");
  r.variant = string_field(j, "variant");
  if (const Json *ref = field(j, "reference")) r.reference = *ref;
  r.messages = messages_from(j);
  if (const Json *resp = object_field(j, "response")) r.response = response_from(*resp);
  if (const Json *e = object_field(j, "request_error")) {
    r.request_error = RequestErrorRecord{string_or(*e, "kind"), opt_int<int>(*e, "http_status").value_or(0),
                                         string_or(*e, "message"), opt_int<int>(*e, "attempts")};
  }
  if (const Json *c = object_field(j, "candidate")) {
    r.candidate = CandidateRecord{string_or(*c, "language"), string_or(*c, "kernel_source"),
                                  string_or(*c, "manifest_text"), string_or(*c, "kernel_hash")};
  }
  if (const Json *v = object_field(j, "verdict")) r.verdict = *v;
  r.feedback = string_or(j, "feedback");
  r.stop_reason = string_or(j, "stop_reason");
  if (const Json *t = object_field(j, "timings")) r.timings = timings_from(*t);
  r.gpu = opt_int<int>(j, "gpu");
  r.seed = opt_int<std::int64_t>(j, "seed");
  if (const Json *rep = object_field(j, "repair_of")) r.repair_of = repair_of_from(*rep);
  if (const Json *s = object_field(j, "synthesized_reasoning"))
    r.synthesized_reasoning = synthesized_from(*s);
  r.started_at = string_or(j, "started_at");
  r.finished_at = string_or(j, "finished_at");
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!known_field(it.key())) r.extra[it.key()] = it.value();
  }
  return r;
}

}  // namespace ptxbench::traces
