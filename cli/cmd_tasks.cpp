// `ptxbench tasks list|show`: the task suite as a table, or one task in full.
#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "tasks/task.hpp"
#include "util/int_expr.hpp"

namespace ptxbench::cli {
namespace {

using nlohmann::json;
using tasks::Task;

struct TasksOptions {
  std::string tasks_dir;  ///< empty = tasks::default_task_dir()
  std::string id;         ///< show: the task id
  bool as_json = false;
};

std::string join(const std::vector<std::string> &items, const char *separator) {
  std::string out;
  for (const auto &s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

/// Loads the suite; on failure prints why and returns nullopt.
std::optional<std::vector<Task>> load_or_report(const TasksOptions &options) {
  std::filesystem::path dir =
      options.tasks_dir.empty() ? tasks::default_task_dir() : std::filesystem::path(options.tasks_dir);
  auto loaded = tasks::load_task_dir(dir);
  if (!loaded) {
    fmt::print(stderr, "ptxbench: cannot load the tasks:\n{}\n", loaded.error());
    return std::nullopt;
  }
  return std::move(loaded).value();
}

std::vector<std::string> workload_names(const Task &t) {
  std::vector<std::string> names;
  for (const auto &w : t.workloads) names.push_back(w.name);
  return names;
}

std::vector<std::string> target_names(const Task &t) {
  std::vector<std::string> names;
  for (const auto &target : t.targets) names.push_back(target.name);
  return names;
}

json summary_json(const Task &t) {
  auto suite = t.tags.find("suite");
  return json{{"id", t.id},
              {"family", tasks::to_string(t.family)},
              {"arch", t.arch},
              {"title", t.title},
              {"workloads", workload_names(t)},
              {"targets", target_names(t)},
              {"reference", t.reference},
              {"suite", suite == t.tags.end() ? "" : suite->second},
              {"source", t.source.string()}};
}

int list_tasks(const TasksOptions &options) {
  auto suite = load_or_report(options);
  if (!suite) return kExitEnvironment;
  if (options.as_json) {
    json out = json::array();
    for (const auto &t : *suite) out.push_back(summary_json(t));
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }
  std::vector<std::array<std::string, 6>> rows{{"ID", "FAMILY", "ARCH", "WORKLOADS", "TARGETS", "REFERENCE"}};
  for (const auto &t : *suite)
    rows.push_back({t.id, tasks::to_string(t.family), t.arch, join(workload_names(t), "; "),
                    join(target_names(t), ", "), t.reference});
  std::array<std::size_t, 6> width{};
  for (const auto &row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto &row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c)
      line += c + 1 == row.size() ? row[c] : fmt::format("{:<{}}  ", row[c], width[c]);
    fmt::print("{}\n", line);
  }
  return kExitOk;
}

/// "1.65e+12" style numbers for FLOPs and bytes of a workload ("?" if the expression fails).
std::string evaluated(const std::string &expr, const tasks::Workload &w) {
  auto v = util::evaluate_int_expression(expr, w.symbols);
  return v ? fmt::format("{:.4g}", static_cast<double>(*v)) : "?";
}

void print_task(const Task &t) {
  fmt::print("{}: {}\n", t.id, t.title);
  fmt::print("  family {}, arch {}, reference {}{}\n", tasks::to_string(t.family), t.arch, t.reference,
             t.causal ? ", causal" : "");
  fmt::print("  source {}\n\n{}\n\nTensors:\n", t.source.string(), t.description);
  for (const auto &x : t.tensors)
    fmt::print(
        "  {:<4} {:<6} {:<6} [{}]  {}{}\n", x.name, x.role == tasks::TensorRole::input ? "input" : "output",
        tasks::to_string(x.dtype), join(x.shape, ", "), x.description,
        x.role == tasks::TensorRole::input ? " (values: " + tasks::to_string(x.distribution) + ")" : "");
  if (!t.scalars.empty()) fmt::print("Scalars:\n");
  for (const auto &s : t.scalars)
    fmt::print("  {} {} = {:.9g}  {}\n", s.name, s.type, s.value, s.description);
  fmt::print("Workloads (the first is the headline):\n");
  for (const auto &w : t.workloads) {
    std::vector<std::string> symbols;
    for (const auto &name : t.symbols) symbols.push_back(fmt::format("{}={}", name, w.symbols.at(name)));
    fmt::print("  {:<22} {}   FLOPs {}   min bytes {}\n", w.name, join(symbols, " "), evaluated(t.flops, w),
               evaluated(t.bytes, w));
  }
  fmt::print("  FLOPs = {};  bytes = {}\nTargets:\n", t.flops, t.bytes);
  for (const auto &target : t.targets)
    fmt::print("  {:<12} PTX {}, SASS {}\n", target.name, target.ptx_mnemonic,
               join(target.sass_families, "/"));
  fmt::print("Tolerances (|x - ref| <= atol + rtol*|ref|):\n");
  for (const auto &[name, tol] : t.tolerances)
    fmt::print("  {:<4} atol {:g}, rtol {:g}: {}\n", name, tol.atol, tol.rtol, tol.reason);
}

int show_task(const TasksOptions &options) {
  auto suite = load_or_report(options);
  if (!suite) return kExitEnvironment;
  const Task *t = tasks::find_task(*suite, options.id);
  if (!t) {
    auto near = tasks::similar_task_ids(*suite, options.id);
    fmt::print(stderr, "ptxbench: unknown task '{}'{}\n", options.id,
               near.empty() ? " (see 'ptxbench tasks list')" : ". Did you mean: " + join(near, ", ") + "?");
    return kExitEnvironment;
  }
  if (options.as_json) {
    json j = t->to_json();
    j["source"] = t->source.string();
    fmt::print("{}\n", j.dump(2));
  } else {
    print_task(*t);
  }
  return kExitOk;
}

}  // namespace

void register_tasks_commands(CLI::App &app, Action &action) {
  auto options = std::make_shared<TasksOptions>();
  CLI::App *tasks_cmd = app.add_subcommand("tasks", "List the benchmark tasks or show one");
  tasks_cmd->require_subcommand(1);
  const std::string dir_help =
      "Folder of task files (default: $PTXBENCH_TASKS, the installed share dir, or the "
      "source tree's tasks/)";

  CLI::App *list =
      tasks_cmd->add_subcommand("list", "Table of tasks: id, family, arch, workloads, targets, reference");
  list->add_flag("--json", options->as_json, "Print a JSON array instead of a table");
  list->add_option("--tasks-dir", options->tasks_dir, dir_help);
  list->callback([&action, options] { action.run = [options] { return list_tasks(*options); }; });

  CLI::App *show =
      tasks_cmd->add_subcommand("show", "One task in full: math, layouts, shapes, targets, tolerances");
  show->add_option("id", options->id, "Task id, e.g. gemm_n7168_k5120")->required();
  show->add_flag("--json", options->as_json, "Print the task as JSON (the task-file schema)");
  show->add_option("--tasks-dir", options->tasks_dir, dir_help);
  show->callback([&action, options] { action.run = [options] { return show_task(*options); }; });
}

}  // namespace ptxbench::cli
