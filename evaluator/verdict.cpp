#include "evaluator/verdict.hpp"

namespace ptxbench::evaluator {
namespace {

using nlohmann::json;

json diagnostic_to_json(const Diagnostic &d) {
  json j{{"severity", d.severity}, {"text", d.text}};
  j["line"] = d.line ? json(*d.line) : json(nullptr);
  return j;
}

Diagnostic diagnostic_from_json(const json &j) {
  Diagnostic d;
  d.severity = j.value("severity", "error");
  d.text = j.at("text").get<std::string>();
  if (j.contains("line") && !j["line"].is_null()) d.line = j["line"].get<int>();
  return d;
}

json stage_to_json(const StageResult &s) {
  json diags = json::array();
  for (const auto &d : s.diagnostics) diags.push_back(diagnostic_to_json(d));
  return json{{"status", to_string(s.status)},
              {"summary", s.summary},
              {"diagnostics", diags},
              {"figures", s.figures},
              {"wall_seconds", s.wall_seconds}};
}

Status status_field(const json &j, const char *key) {
  auto text = j.at(key).get<std::string>();
  auto s = status_from_string(text);
  if (!s) throw json::other_error::create(501, "unknown status '" + text + "'", &j);
  return *s;
}

StageResult stage_from_json(const json &j) {
  StageResult s;
  s.status = status_field(j, "status");
  s.summary = j.value("summary", "");
  if (j.contains("diagnostics"))
    for (const auto &d : j["diagnostics"]) s.diagnostics.push_back(diagnostic_from_json(d));
  s.figures = j.value("figures", json::object());
  s.wall_seconds = j.value("wall_seconds", 0.0);
  return s;
}

template <class T>
json optional_to_json(const std::optional<T> &v) {
  return v ? json(*v) : json(nullptr);
}

template <class T>
std::optional<T> optional_from_json(const json &j, const char *key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

// Pipeline order: the overall status is the first stage that did not pass.
constexpr StageResult Verdict::*kPipeline[] = {&Verdict::parse,       &Verdict::static_checks,
                                               &Verdict::compile,     &Verdict::correctness,
                                               &Verdict::execution,   &Verdict::timing};
constexpr const char *kStageNames[] = {"parse", "static", "compile", "correctness", "execution", "timing"};

}  // namespace

json Verdict::to_json() const {
  json stages = json::object();
  for (std::size_t i = 0; i < std::size(kPipeline); ++i) stages[kStageNames[i]] = stage_to_json(this->*kPipeline[i]);
  stages["sanitizer"] = stage_to_json(sanitizer);
  return json{{"status", evaluator::to_string(status)},
              {"task_id", task_id},
              {"kernel_hash", kernel_hash},
              {"stages", stages},
              {"axes",
               {{"correct", optional_to_json(axes.correct)},
                {"targets_executed", optional_to_json(axes.targets_executed)},
                {"speedup", optional_to_json(axes.speedup)}}},
              {"settings", settings},
              {"environment", environment},
              {"wall_seconds", wall_seconds},
              {"profile", profile},
              {"reused_from", reused_from}};
}

Verdict Verdict::from_json(const json &j) {
  Verdict v;
  v.status = status_field(j, "status");
  v.task_id = j.value("task_id", "");
  v.kernel_hash = j.value("kernel_hash", "");
  const json &stages = j.at("stages");
  for (std::size_t i = 0; i < std::size(kPipeline); ++i)
    if (stages.contains(kStageNames[i])) v.*kPipeline[i] = stage_from_json(stages[kStageNames[i]]);
  if (stages.contains("sanitizer")) v.sanitizer = stage_from_json(stages["sanitizer"]);
  if (j.contains("axes")) {
    const json &a = j["axes"];
    v.axes.correct = optional_from_json<bool>(a, "correct");
    v.axes.targets_executed = optional_from_json<bool>(a, "targets_executed");
    v.axes.speedup = optional_from_json<double>(a, "speedup");
  }
  v.settings = j.value("settings", json::object());
  v.environment = j.value("environment", json::object());
  v.wall_seconds = j.value("wall_seconds", 0.0);
  v.profile = j.value("profile", json::object());
  if (j.contains("reused_from")) v.reused_from = j["reused_from"];
  return v;
}

void Verdict::finalize_status() {
  status = Status::ok;
  for (auto member : kPipeline) {
    const StageResult &s = this->*member;
    if (s.status != Status::ok && s.status != Status::skipped) {
      status = s.status;
      return;
    }
  }
  // Nothing ran at all (e.g. parse skipped): report skipped rather than ok.
  if (parse.status == Status::skipped) status = Status::skipped;
}

}  // namespace ptxbench::evaluator
