#include "evaluator/protocol/verdict.hpp"

#include "evaluator/protocol/error.hpp"
#include "util/enum_names.hpp"

#include <algorithm>
#include <stdexcept>

namespace ptxbench::protocol {
namespace {

using nlohmann::json;

constexpr util::EnumName<MachineFault> kMachineFaultNames[] = {
    {MachineFault::worker_not_started, "worker_not_started"},
    {MachineFault::no_device, "no_device"},
    {MachineFault::gpu_lock, "gpu_lock"},
    {MachineFault::worker_killed, "worker_killed"},
};

template <class T>
json optional_to_json(const std::optional<T> &v) {
  return v ? json(*v) : json(nullptr);
}

template <class T>
std::optional<T> optional_from_json(const json &j, const char *key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

}  // namespace

std::string_view to_string(MachineFault fault) {
  return util::enum_to_string(kMachineFaultNames, fault);
}

std::optional<MachineFault> machine_fault_from_string(std::string_view name) {
  return util::enum_from_string(kMachineFaultNames, name);
}

json Generalization::to_json() const {
  json failures = json::array();
  for (const auto &f : failed)
    failures.push_back({{"workload", f.workload},
                        {"kind", f.kind},
                        {"summary", f.summary},
                        {"wrong_share", optional_to_json(f.wrong_share)}});
  return json{{"value", optional_to_json(value)}, {"passed", passed}, {"total", total}, {"failed", failures},
              {"first_mismatch", first_mismatch}, {"reason", reason}};
}

Generalization Generalization::from_json(const json &j) {
  Generalization g;
  g.value = optional_from_json<bool>(j, "value");
  g.passed = j.value("passed", 0);
  g.total = j.value("total", 0);
  if (j.contains("failed") && j["failed"].is_array())
    for (const auto &f : j["failed"])
      g.failed.push_back({f.value("workload", ""), f.value("kind", ""), f.value("summary", ""),
                          optional_from_json<double>(f, "wrong_share")});
  g.first_mismatch = j.value("first_mismatch", json(nullptr));
  g.reason = j.value("reason", "");
  return g;
}

json Verdict::to_json() const {
  json stages = json::object();
  for (const auto &row : kStageTable)
    if (written(row.stage)) stages[std::string(row.name)] = stage(row.stage);
  json out{{"status", to_string(status)},
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
           {"reused_from", reused_from},
           {"generalizes", generalizes ? generalizes->to_json() : json(nullptr)}};
  if (kernel_output) out["kernel_output"] = *kernel_output;
  if (machine_fault) out["machine_fault"] = std::string(to_string(*machine_fault));
  return out;
}

Verdict Verdict::from_json(const json &j) {
  Verdict v;
  if (!j.is_object()) throw ProtocolError("", "a verdict is a JSON object");
  // A verdict written by hand or by an older build may lack the status or the stages: the stages read as
  // not run and the status is recomputed from them.
  const auto overall = j.contains("status") && j["status"].is_string()
                           ? status_from_string(j["status"].get<std::string>())
                           : std::nullopt;
  v.task_id = j.value("task_id", "");
  v.kernel_hash = j.value("kernel_hash", "");
  if (j.contains("stages")) {
    const json &stages = j["stages"];
    if (!stages.is_object()) throw ProtocolError("stages", "expected an object");
    for (const auto &row : kStageTable)
      if (const std::string name(row.name); stages.contains(name)) {
        v.stage(row.stage) = stages[name].get<StageResult>();
        v.stages_read.push_back(row.stage);
      }
  }
  if (j.contains("generalizes") && j["generalizes"].is_object())
    v.generalizes = Generalization::from_json(j["generalizes"]);
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
  if (j.contains("kernel_output") && !j["kernel_output"].is_null())
    v.kernel_output = j["kernel_output"].get<KernelOutput>();
  if (j.contains("machine_fault") && j["machine_fault"].is_string())
    v.machine_fault = machine_fault_from_string(j["machine_fault"].get<std::string>());
  if (overall)
    v.status = *overall;
  else
    v.finalize_status();
  return v;
}

StageResult &Verdict::stage(Stage s) {
  switch (s) {
    case Stage::parse:
      return parse;
    case Stage::static_checks:
      return static_checks;
    case Stage::compile:
      return compile;
    case Stage::correctness:
      return correctness;
    case Stage::execution:
      return execution;
    case Stage::timing:
      return timing;
    case Stage::sanitizer:
      return sanitizer;
    case Stage::generalization:
      return generalization;
    case Stage::profile:
      return profiling;
  }
  throw std::logic_error("a stage without a verdict slot");
}

const StageResult &Verdict::stage(Stage s) const {
  return const_cast<Verdict &>(*this).stage(s);
}

bool Verdict::written(Stage s) const {
  if (!stages_read.empty()) return std::find(stages_read.begin(), stages_read.end(), s) != stages_read.end();
  // Only tasks with hidden workloads have the stage and the result, so other verdicts read as before.
  if (s == Stage::generalization) return generalizes.has_value();
  // Verdicts made without the profile stage (GPU stages off, older runs) read as before.
  if (s == Stage::profile) return profiling.status != Status::skipped || !profiling.summary.empty();
  return true;
}

void Verdict::skip_from(Stage failed) {
  const std::string summary =
      "not run: an earlier stage ended with " + std::string(to_string(stage(failed).status));
  bool after = false;
  for (const auto &row : kStageTable) {
    if (after && row.skipped_after_failure) {
      stage(row.stage).status = Status::skipped;
      stage(row.stage).summary = summary;
    }
    if (row.stage == failed) after = true;
  }
}

void Verdict::skip_gpu_stages(const std::string &reason, GpuSkip which) {
  for (const auto &row : kStageTable) {
    if (!row.skipped_without_gpu) continue;
    if (which == GpuSkip::shown_workloads && row.stage == Stage::generalization) continue;
    stage(row.stage).status = Status::skipped;
    stage(row.stage).summary = reason;
  }
  if (generalizes && which == GpuSkip::all)
    *generalizes = Generalization{std::nullopt, 0, 0, {}, nullptr, "not checked: " + reason};
}

std::optional<KernelProfile> Verdict::kernel_profile() const {
  if (profiling.status != Status::ok) return std::nullopt;
  return kernel_profile_from_figures(profiling.figures);
}

std::optional<ProfileFigures> Verdict::profile_figures() const {
  return profile_figures_from_figures(profiling.figures);
}

std::optional<TimingFigures> Verdict::timing_figures() const {
  return timing_figures_from_figures(timing.figures);
}

std::optional<ExecutionFigures> Verdict::execution_figures() const {
  return execution_figures_from_figures(execution.figures);
}

std::optional<CorrectnessFigures> Verdict::correctness_figures() const {
  return correctness_figures_from_figures(correctness.figures);
}

std::optional<ParseFigures> Verdict::parse_figures() const {
  return parse_figures_from_figures(parse.figures);
}

std::optional<StaticFigures> Verdict::static_figures() const {
  return static_figures_from_figures(static_checks.figures);
}

std::optional<CompileFigures> Verdict::compile_figures() const {
  return compile_figures_from_figures(compile.figures);
}

std::optional<SanitizerFigures> Verdict::sanitizer_figures() const {
  return sanitizer_figures_from_figures(sanitizer.figures);
}

std::optional<GeneralizationFigures> Verdict::generalization_figures() const {
  return generalization_figures_from_figures(generalization.figures);
}

void Verdict::finalize_status() {
  status = Status::ok;
  for (const auto &row : kStageTable) {
    if (!row.decides_status) continue;
    const StageResult &s = stage(row.stage);
    if (s.status != Status::ok && s.status != Status::skipped) {
      status = s.status;
      return;
    }
  }
  // Nothing ran at all (e.g. parse skipped): report skipped rather than ok.
  if (parse.status == Status::skipped) status = Status::skipped;
}

}  // namespace ptxbench::protocol
