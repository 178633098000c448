// The task model's queries (find_*, shape_of) and its JSON form (the task-file schema, which the loader in
// task.cpp reads back).
#include <stdexcept>

#include <fmt/core.h>

#include "tasks/task.hpp"

namespace ptxbench::tasks {

using nlohmann::json;

const Tensor *Task::find_tensor(std::string_view name) const {
  for (const auto &t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const Scalar *Task::find_scalar(std::string_view name) const {
  for (const auto &s : scalars)
    if (s.name == name) return &s;
  return nullptr;
}

const Workload *Task::find_workload(std::string_view name) const {
  for (const auto *list : {&workloads, &hidden_workloads})
    for (const auto &w : *list)
      if (w.name == name) return &w;
  return nullptr;
}

const TargetInstruction *Task::find_target(std::string_view name) const {
  for (const auto &t : targets)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<std::int64_t> Task::shape_of(const Tensor &t, const Workload &w) const {
  std::vector<std::int64_t> dims;
  for (const auto &expr : t.shape) {
    auto v = util::evaluate_int_expression(expr, w.symbols);
    if (!v || *v <= 0)
      throw std::logic_error(fmt::format("task {}: tensor {} dimension '{}' at workload {}: {}", id, t.name,
                                         expr, w.name, v ? "not positive" : v.error()));
    dims.push_back(*v);
  }
  return dims;
}

json Task::to_json() const {
  json tensors_json = json::array();
  for (const auto &t : tensors) {
    json j{{"name", t.name},
           {"dtype", tasks::to_string(t.dtype)},
           {"shape", t.shape},
           {"role", t.role == TensorRole::input ? "input" : "output"}};
    if (t.role == TensorRole::input) j["distribution"] = tasks::to_string(t.distribution);
    j["description"] = t.description;
    tensors_json.push_back(std::move(j));
  }
  json scalars_json = json::array();
  for (const auto &s : scalars)
    scalars_json.push_back(
        {{"name", s.name}, {"type", s.type}, {"value", s.value}, {"description", s.description}});
  const auto workloads_to_json = [](const std::vector<Workload> &list) {
    json out = json::array();
    for (const auto &w : list) {
      json symbols_json = json::object();
      for (const auto &[k, v] : w.symbols) symbols_json[k] = v;
      out.push_back({{"name", w.name}, {"symbols", symbols_json}});
    }
    return out;
  };
  const json workloads_json = workloads_to_json(workloads);
  json targets_json = json::array();
  for (const auto &t : targets)
    targets_json.push_back({{"name", t.name},
                            {"ptx_mnemonic", t.ptx_mnemonic},
                            {"sass_families", t.sass_families},
                            {"description", t.description}});
  json tolerances_json = json::object();
  for (const auto &[name, tol] : tolerances)
    tolerances_json[name] = {{"atol", tol.atol}, {"rtol", tol.rtol}, {"reason", tol.reason}};
  json tags_json = json::object();
  for (const auto &[k, v] : tags) tags_json[k] = v;
  json j{{"id", id},
         {"family", tasks::to_string(family)},
         {"arch", arch},
         {"title", title},
         {"description", description},
         {"tensors", tensors_json},
         {"scalars", scalars_json},
         {"symbols", symbols},
         {"workloads", workloads_json},
         {"targets", targets_json},
         {"reference", reference},
         {"causal", causal},
         {"tolerances", tolerances_json},
         {"flops", flops},
         {"bytes", bytes},
         {"tags", tags_json}};
  if (!tolerance_note.empty())
    j["tolerance_note"] = tolerance_note;  // absent, as in the files that have none
  if (!hidden_workloads.empty()) j["hidden_workloads"] = workloads_to_json(hidden_workloads);
  if (!ranges.empty()) {
    json ranges_json = json::object();
    for (const auto &[symbol, r] : ranges)
      ranges_json[symbol] = {{"min", r.min}, {"max", r.max}, {"multiple_of", r.multiple_of}};
    j["ranges"] = ranges_json;
  }
  return j;
}

}  // namespace ptxbench::tasks
