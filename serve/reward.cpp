#include "serve/reward.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <vector>

#include <fmt/core.h>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/stages.hpp"
#include "evaluator/protocol/execution.hpp"
#include "evaluator/protocol/timing.hpp"
#include "serve/detail/key_values.hpp"

namespace ptxbench::serve {

using evaluator::Status;
using nlohmann::json;

json RewardFormula::to_json() const {
  return {{"enabled", enabled},
          {"compiled", compiled},
          {"correct", correct},
          {"targets", targets},
          {"speedup", speedup},
          {"speedup_cap", speedup_cap},
          {"no_generalize", no_generalize},
          {"suspicious_value", suspicious_value},
          {"timeout_value", timeout_value}};
}

util::Expected<RewardFormula> parse_reward_formula(std::string_view text) {
  RewardFormula f;
  if (text == "none") {
    f.enabled = false;
    return f;
  }
  const std::map<std::string, double RewardFormula::*, std::less<>> fields = {
      {"compiled", &RewardFormula::compiled},
      {"correct", &RewardFormula::correct},
      {"targets", &RewardFormula::targets},
      {"speedup", &RewardFormula::speedup},
      {"speedup_cap", &RewardFormula::speedup_cap},
      {"no_generalize", &RewardFormula::no_generalize},
      {"suspicious_value", &RewardFormula::suspicious_value},
      {"timeout_value", &RewardFormula::timeout_value}};
  for (const auto &[key, given] : detail::key_values(text, ',')) {
    auto it = fields.find(key);
    if (it == fields.end() || !given)
      return util::unexpected(
          fmt::format("reward formula: unknown item '{}' (want key=value with key one of "
                      "compiled, correct, targets, speedup, speedup_cap, no_generalize, "
                      "suspicious_value, timeout_value; or 'none')",
                      key));
    const std::string &value = *given;
    double v = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || ptr != value.data() + value.size() || !std::isfinite(v))
      return util::unexpected(fmt::format("reward formula: '{}' is not a number for {}", value, key));
    f.*(it->second) = v;
  }
  if (!(f.speedup_cap > 0)) return util::unexpected(std::string("reward formula: speedup_cap must be > 0"));
  return f;
}

namespace {

json optional_json(const std::optional<bool> &b) {
  return b ? json(*b) : json(nullptr);
}

/// The execution stage's targets: name, executed, counts and shares as the worker reported them (through
/// the protocol's codec; none when not counted or malformed, which the evaluator warned about).
json target_parts(const evaluator::Verdict &v) {
  std::optional<protocol::ExecutionFigures> figures;
  try {
    figures = v.execution_figures();
  } catch (const protocol::ProtocolError &) {
  }
  json out = json::array();
  if (!figures) return out;
  const auto or_null = [](const auto &value) { return value ? json(*value) : json(nullptr); };
  for (const auto &t : figures->targets)
    out.push_back({{"name", t.name},
                   {"executed", t.executed},
                   {"present_in_sass", t.present_in_sass},
                   {"warp_executions", or_null(t.warp_executions)},
                   {"work_flops", or_null(t.work_flops)},
                   {"work_share", or_null(t.work_share)},
                   {"byte_share", or_null(t.byte_share)}});
  return out;
}

/// The timing figures through the protocol's codec; none when not timed or malformed (the evaluator
/// warned about that in the stage's diagnostics).
protocol::TimingFigures timing_of(const evaluator::Verdict &v) {
  try {
    return v.timing_figures().value_or(protocol::TimingFigures{});
  } catch (const protocol::ProtocolError &) {
    return {};
  }
}

/// The speedup per timed workload with its 95% interval, and the geometric mean of the interval ends.
void speedup_parts(const evaluator::Verdict &v, json &parts) {
  json rows = json::array();
  double log_lo = 0, log_hi = 0;
  int with_interval = 0;
  for (const protocol::TimingWorkload &w : timing_of(v).workloads) {
    json ci = nullptr;
    if (w.speedup_ci95.bounded()) {
      log_lo += std::log(w.speedup_ci95.lo);
      log_hi += std::log(w.speedup_ci95.hi);
      ++with_interval;
      ci = w.speedup_ci95;
    }
    rows.push_back({{"workload", w.name},
                    {"speedup", w.speedup},
                    {"ci95", ci},
                    {"stopped_by", protocol::to_string(w.stopped_by)}});
  }
  parts["speedup"] = v.axes.speedup ? json(*v.axes.speedup) : json(nullptr);
  parts["speedup_ci95"] =
      v.axes.speedup && with_interval > 0 && with_interval == static_cast<int>(rows.size())
          ? json::array({std::exp(log_lo / with_interval), std::exp(log_hi / with_interval)})
          : json(nullptr);
  parts["speedup_workloads"] = std::move(rows);
}

/// What makes a verdict untrustworthy as a reward, by name: suspicious or nondeterministic stages, inputs
/// changed, guard regions written.
json suspicious_flags(const evaluator::Verdict &v) {
  std::vector<std::string> flags;
  for (const auto &row : protocol::kStageTable) {
    if (!row.decides_status) continue;  // the stages of the status order: parse through timing
    const evaluator::StageResult &s = v.stage(row.stage);
    if (s.status == Status::suspicious) flags.push_back(fmt::format("suspicious:{}", row.name));
    if (s.status == Status::nondeterministic) flags.push_back(fmt::format("nondeterministic:{}", row.name));
  }
  std::optional<protocol::CorrectnessFigures> correctness;
  try {
    correctness = v.correctness_figures();
  } catch (const protocol::ProtocolError &) {
    // figures this build cannot read: no flags from them (the stage's status still counts)
  }
  if (correctness)
    for (const protocol::CorrectnessWorkload &w : correctness->workloads) {
      if (w.inputs_mutated) flags.push_back(fmt::format("inputs_mutated:{}", w.name));
      if (w.guard_damage > 0) flags.push_back(fmt::format("guard_damage:{}", w.name));
    }
  for (const protocol::TimingWorkload &w : timing_of(v).workloads)
    if (w.inputs_mutated) flags.push_back(fmt::format("inputs_mutated:{}", w.name));
  std::sort(flags.begin(), flags.end());
  flags.erase(std::unique(flags.begin(), flags.end()), flags.end());
  return flags;
}

}  // namespace

json reward_of(const evaluator::Verdict &v, const std::string &feedback, const RewardFormula &formula,
               bool deadline_exceeded) {
  json parts = json::object();
  parts["status"] = evaluator::to_string(v.status);
  parts["deadline_exceeded"] = deadline_exceeded;
  parts["compiled"] = v.compile.status == Status::ok;
  parts["compile_status"] = evaluator::to_string(v.compile.status);
  const bool gpu_ran = v.correctness.status != Status::skipped;
  parts["measured_on_gpu"] = gpu_ran;
  parts["gpu_skipped_reason"] =
      !gpu_ran && v.compile.status == Status::ok ? json(v.correctness.summary) : json(nullptr);
  parts["correct"] = optional_json(v.axes.correct);
  parts["targets_executed"] = optional_json(v.axes.targets_executed);
  parts["targets"] = target_parts(v);
  speedup_parts(v, parts);
  parts["suspicious_flags"] = suspicious_flags(v);
  parts["suspicious"] = !parts["suspicious_flags"].empty();
  if (v.generalizes)
    parts["generalizes"] = {{"value", optional_json(v.generalizes->value)},
                            {"passed", v.generalizes->passed},
                            {"total", v.generalizes->total},
                            {"reason", v.generalizes->reason}};
  else
    parts["generalizes"] = nullptr;
  parts["reused"] = !v.reused_from.is_null();
  parts["feedback"] = feedback;
  const auto scalar = reward_scalar(parts, formula);
  parts["scalar"] = scalar ? json(*scalar) : json(nullptr);
  return parts;
}

std::optional<double> reward_scalar(const json &parts, const RewardFormula &f) {
  if (!f.enabled) return std::nullopt;
  if (parts.value("deadline_exceeded", false)) return f.timeout_value;
  if (parts.value("suspicious", false)) return f.suspicious_value;
  const auto is_true = [&](const char *key) {
    const json &b = parts.value(key, json(nullptr));
    return b.is_boolean() && b.get<bool>();
  };
  double r = 0;
  if (is_true("compiled")) r += f.compiled;
  if (is_true("correct")) {
    r += f.correct;
    if (is_true("targets_executed")) r += f.targets;
    const json &s = parts.value("speedup", json(nullptr));
    if (s.is_number() && s.get<double>() > 0)
      r += f.speedup * std::min(s.get<double>(), f.speedup_cap) / f.speedup_cap;
  }
  const json &g = parts.value("generalizes", json(nullptr));
  if (g.is_object() && g.value("value", json(nullptr)) == json(false)) r *= f.no_generalize;
  return r;
}

}  // namespace ptxbench::serve
