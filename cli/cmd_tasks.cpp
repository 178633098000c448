// `ptxbench tasks list|show|import|export`: the task suite as a table, one task in full, and tasks to and
// from FlashInfer-Trace definitions (tasks/flashinfer.hpp).
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
#include "tasks/flashinfer.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/int_expr.hpp"

namespace ptxbench::cli {
namespace {

using nlohmann::json;
using tasks::Task;

struct TasksOptions {
  std::string tasks_dir;  ///< empty = tasks::default_task_dir()
  std::string id;         ///< show, export: the task id
  bool as_json = false;
};

struct ImportCliOptions {
  std::string definition;   ///< the Definition JSON file
  std::string workloads;    ///< its Workload JSONL file (optional)
  std::string output;       ///< file, or folder to write <id>.json into; empty: stdout
  std::string template_id;  ///< empty: the family's default (first present of template_candidates)
  std::string tasks_dir;    ///< where the template is read
  tasks::flashinfer::ImportOptions import;
};

struct ExportCliOptions {
  std::string id;
  std::string tasks_dir;
  std::string output;            ///< the Definition file; empty: stdout
  std::string workloads_output;  ///< the JSONL file; default: next to `output`, same stem, .jsonl
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

/// A JSON file, or why not (printed); `what` names it in messages.
std::optional<nlohmann::json> read_json_file(const std::string &path, const char *what, int &code) {
  auto text = util::read_file(path, 64u << 20);
  if (!text) {
    fmt::print(stderr, "ptxbench: cannot read the {} {}: {}\n", what, path, text.error());
    code = kExitEnvironment;
    return std::nullopt;
  }
  try {
    return json::parse(*text);
  } catch (const json::parse_error &e) {
    fmt::print(stderr, "ptxbench: {} {}: not JSON: {}\n", what, path, e.what());
    code = kExitUsage;
    return std::nullopt;
  }
}

/// The workload lines of --workloads (none without it), or why not (printed).
std::optional<std::vector<json>> read_workloads(const std::string &path, int &code) {
  if (path.empty()) return std::vector<json>{};
  auto text = util::read_file(path, 256u << 20);
  if (!text) {
    fmt::print(stderr, "ptxbench: cannot read the workloads {}: {}\n", path, text.error());
    code = kExitEnvironment;
    return std::nullopt;
  }
  auto parsed = tasks::flashinfer::parse_workloads_jsonl(*text, path);
  if (!parsed) {
    fmt::print(stderr, "ptxbench: {}\n", parsed.error());
    code = kExitUsage;
    return std::nullopt;
  }
  return std::move(*parsed);
}

/// Where --output writes the task (empty: stdout; a folder: the id is known after the import). A .json
/// file names the task: its stem becomes `options.id`. Nullopt, with why printed, on a bad --output.
std::optional<std::filesystem::path> import_output(const ImportCliOptions &o,
                                                   tasks::flashinfer::ImportOptions &options) {
  if (o.output.empty()) return std::filesystem::path();
  std::error_code ec;
  const std::filesystem::path out(o.output);
  if (std::filesystem::is_directory(out, ec) || o.output.back() == '/') return out;
  if (out.extension() != ".json") {
    fmt::print(stderr, "ptxbench: --output {}: a task file ends in .json (or name a folder)\n", o.output);
    return std::nullopt;
  }
  if (!options.id.empty() && options.id != out.stem().string()) {
    fmt::print(stderr,
               "ptxbench: --id {} differs from the output file's name {} (a task's id is its file "
               "stem)\n",
               options.id, out.filename().string());
    return std::nullopt;
  }
  options.id = out.stem().string();
  return out;
}

/// The imported task file on stdout, or written to `out_file` (a folder: <id>.json in it).
int write_imported_task(const tasks::flashinfer::Imported &imported, std::filesystem::path out_file,
                        const Task &templ) {
  for (const auto &note : imported.notes) fmt::print(stderr, "note: {}\n", note);
  const std::string text = tasks::flashinfer::task_file_text(imported.task);
  if (out_file.empty()) {
    fmt::print("{}", text);
    return kExitOk;
  }
  if (out_file.extension() != ".json") out_file /= imported.task["id"].get<std::string>() + ".json";
  if (auto w = util::write_file_atomic(out_file, text); !w) {
    fmt::print(stderr, "ptxbench: cannot write {}: {}\n", out_file.string(), w.error());
    return kExitEnvironment;
  }
  fmt::print(stderr, "wrote {} (task {}, template {}: {} shown, {} hidden workloads)\n", out_file.string(),
             imported.task["id"].get<std::string>(), templ.id, imported.task["workloads"].size(),
             imported.task.value("hidden_workloads", json::array()).size());
  return kExitOk;
}

int import_task(const ImportCliOptions &o) {
  int code = kExitOk;
  auto definition = read_json_file(o.definition, "definition", code);
  if (!definition) return code;
  auto lines = read_workloads(o.workloads, code);
  if (!lines) return code;
  auto mapping = tasks::flashinfer::classify(*definition);
  if (!mapping) {
    fmt::print(stderr, "ptxbench: cannot import {}: {}\n", o.definition, mapping.error());
    return kExitUsage;
  }
  TasksOptions dir_options;
  dir_options.tasks_dir = o.tasks_dir;
  auto suite = load_or_report(dir_options);
  if (!suite) return kExitEnvironment;
  const Task *templ = nullptr;
  const std::vector<std::string> candidates =
      o.template_id.empty() ? tasks::flashinfer::template_candidates(*mapping) : std::vector{o.template_id};
  for (const auto &id : candidates)
    if ((templ = tasks::find_task(*suite, id))) break;
  if (!templ) {
    fmt::print(stderr, "ptxbench: no template task ({}) in the tasks folder (see --template, --tasks-dir)\n",
               join(candidates, " or "));
    return kExitEnvironment;
  }
  tasks::flashinfer::ImportOptions options = o.import;
  auto out_file = import_output(o, options);
  if (!out_file) return kExitUsage;
  auto imported = tasks::flashinfer::import_definition(*definition, *lines, *templ, options);
  if (!imported) {
    fmt::print(stderr, "ptxbench: cannot import {}: {}\n", o.definition, imported.error());
    return kExitUsage;
  }
  return write_imported_task(*imported, *out_file, *templ);
}

int export_task(const ExportCliOptions &o) {
  TasksOptions dir_options;
  dir_options.tasks_dir = o.tasks_dir;
  auto suite = load_or_report(dir_options);
  if (!suite) return kExitEnvironment;
  const Task *t = tasks::find_task(*suite, o.id);
  if (!t) {
    fmt::print(stderr, "ptxbench: unknown task '{}' (see 'ptxbench tasks list')\n", o.id);
    return kExitEnvironment;
  }
  auto exported = tasks::flashinfer::export_task(*t);
  if (!exported) {
    fmt::print(stderr, "ptxbench: cannot export: {}\n", exported.error());
    return kExitUsage;
  }
  std::string workloads_path = o.workloads_output;
  if (workloads_path.empty() && !o.output.empty())
    workloads_path = std::filesystem::path(o.output).replace_extension(".jsonl").string();
  if (o.output.empty()) {
    fmt::print("{}\n", exported->definition.dump(2));
  } else if (auto w = util::write_file_atomic(o.output, exported->definition.dump(2) + "\n"); !w) {
    fmt::print(stderr, "ptxbench: cannot write {}: {}\n", o.output, w.error());
    return kExitEnvironment;
  }
  if (!workloads_path.empty()) {
    if (auto w = util::write_file_atomic(workloads_path, exported->workloads_jsonl()); !w) {
      fmt::print(stderr, "ptxbench: cannot write {}: {}\n", workloads_path, w.error());
      return kExitEnvironment;
    }
  }
  if (!o.output.empty() || !workloads_path.empty())
    fmt::print(stderr, "wrote {}{}{} ({} workloads: {} shown, {} hidden)\n", o.output,
               o.output.empty() || workloads_path.empty() ? "" : " and ", workloads_path,
               exported->workloads.size(), t->workloads.size(), t->hidden_workloads.size());
  return kExitOk;
}

}  // namespace

void register_tasks_commands(CLI::App &app, Action &action) {
  auto options = std::make_shared<TasksOptions>();
  CLI::App *tasks_cmd =
      app.add_subcommand("tasks", "List the benchmark tasks or show one; import/export FlashInfer-Trace");
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

  auto imp = std::make_shared<ImportCliOptions>();
  CLI::App *import_cmd = tasks_cmd->add_subcommand(
      "import",
      "Make a task file from a FlashInfer-Trace definition (+ its workloads .jsonl): op_type gemm (A[M,K], "
      "B[N,K] -> C[M,N]) and mha_dense attention forward/backward map; ragged or paged attention, "
      "grouped-query heads and dtypes without a PTXBench reference are refused with the reason. Const axes "
      "become fixed symbols, var axes symbols whose values come from the workloads: the first shown, the "
      "rest "
      "hidden, ranges spanning them (or the definition's constraints). Arch, targets, reference library, "
      "tolerances and FLOP/byte formulas come from a committed task of the family (the template).");
  import_cmd->add_option("definition", imp->definition, "Definition JSON file")->required();
  import_cmd->add_option("--workloads", imp->workloads,
                         "Workload JSONL file of the definition (one per line)");
  import_cmd->add_option("-o,--output", imp->output,
                         "Task file to write (its stem is the id), or a folder to write <id>.json into "
                         "(default: print the task to stdout)");
  import_cmd->add_option("--id", imp->import.id, "Task id (default: fi_<definition name>)");
  import_cmd->add_option(
      "--template", imp->template_id,
      "Task whose targets, tolerances, reference and formulas to use (default: the family's "
      "core task, e.g. gemm_n7168_k5120, mha_fwd_d128)");
  import_cmd->add_option("--tasks-dir", imp->tasks_dir, dir_help + "; the template is read there");
  import_cmd->add_option("--shown-workload", imp->import.shown,
                         "The workload shown to the model: 0-based line index or uuid (default: the first)");
  import_cmd->add_flag("--all-shown", imp->import.all_shown, "Show every workload (no hidden workloads)");
  import_cmd->add_flag("--ignore-input-data", imp->import.ignore_input_data,
                       "Accept workloads whose inputs are recorded tensors (safetensors): keep their shapes, "
                       "PTXBench draws its own values");
  import_cmd->callback([&action, imp] { action.run = [imp] { return import_task(*imp); }; });

  auto exp = std::make_shared<ExportCliOptions>();
  CLI::App *export_cmd = tasks_cmd->add_subcommand(
      "export",
      "Write a task as a FlashInfer-Trace definition (op_type gemm or mha_dense) and its workloads (.jsonl, "
      "shown then hidden; ranges become constraints). Not carried: targets, tolerances, reference library, "
      "FLOP/byte formulas, title and tags (import takes them from the template again).");
  export_cmd->add_option("id", exp->id, "Task id, e.g. gemm_n7168_k5120")->required();
  export_cmd->add_option("-o,--output", exp->output,
                         "Definition file to write (default: print it to stdout)");
  export_cmd->add_option("--workloads-output", exp->workloads_output,
                         "Workload JSONL file to write (default: next to --output, same name, .jsonl)");
  export_cmd->add_option("--tasks-dir", exp->tasks_dir, dir_help);
  export_cmd->callback([&action, exp] { action.run = [exp] { return export_task(*exp); }; });
}

}  // namespace ptxbench::cli
