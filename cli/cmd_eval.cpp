// `ptxbench eval --task ID --response FILE [--json] [--no-gpu]`: one model
// response through every evaluation stage; prints the verdict.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "agent/prompt_builder.hpp"
#include "cli/cli.hpp"
#include "evaluator/evaluator.hpp"
#include "tasks/task.hpp"

namespace ptxbench::cli {
namespace {

using evaluator::StageResult;
using evaluator::Status;

struct EvalOptions {
  std::string task_id;
  std::string response_path;  ///< "-" = stdin
  std::string tasks_dir;      ///< empty = tasks::default_task_dir()
  bool as_json = false;
  bool no_gpu = false;
  double ptxas_timeout_s = 30;  ///< seconds
  double cooldown_ratio =
      evaluator::TimingPolicy{}.cooldown_ratio;  ///< GPU idle after each timed launch, x its time
  bool no_hidden = false, time_hidden = false, reveal_hidden = false;  ///< EvaluatorSettings::hidden
  bool no_sanitizer = false;                                           ///< !EvaluatorSettings::run_sanitizer
  bool feedback = false;              ///< also print (to stderr) the feedback the run loop would send
  int num_sms = 0;                    ///< the manifest's num_sms; 0 = the task's GPU's
  std::optional<std::uint64_t> seed;  ///< the run seed for the inputs; none = drawn (and printed)
};

std::string axis_text(const std::optional<bool> &b) {
  return b ? (*b ? "yes" : "no") : "not measured";
}

void print_stage(const char *name, const StageResult &s) {
  fmt::print("  {:<12} {:<16} {}\n", name, evaluator::to_string(s.status), s.summary);
  if (s.status == Status::skipped) return;
  int shown = 0;
  for (const auto &d : s.diagnostics) {
    if (d.severity == "error" && d.text == s.summary) continue;  // already the summary
    if (++shown > 8) {
      fmt::print("               ... {} more message(s) (see --json)\n", s.diagnostics.size() - 8);
      break;
    }
    fmt::print("               {}: {}{}\n", d.severity, d.line ? fmt::format("line {}: ", *d.line) : "",
               d.text);
  }
}

int run_eval(const EvalOptions &options) {
  std::filesystem::path dir =
      options.tasks_dir.empty() ? tasks::default_task_dir() : std::filesystem::path(options.tasks_dir);
  auto suite = tasks::load_task_dir(dir);
  if (!suite) {
    fmt::print(stderr, "ptxbench: cannot load the tasks from {}:\n{}\n", dir.string(), suite.error());
    return kExitEnvironment;
  }
  const tasks::Task *task = tasks::find_task(*suite, options.task_id);
  if (!task) {
    auto near = tasks::similar_task_ids(*suite, options.task_id);
    fmt::print(stderr, "ptxbench: unknown task '{}'{}\n", options.task_id,
               near.empty() ? "" : fmt::format(" (did you mean: {}?)", fmt::join(near, ", ")));
    return kExitEnvironment;
  }
  evaluator::EvaluatorSettings settings;
  settings.run_gpu = !options.no_gpu;
  settings.compile.ptxas_wall = std::chrono::milliseconds(static_cast<long>(options.ptxas_timeout_s * 1000));
  settings.timing.cooldown_ratio = options.cooldown_ratio;
  settings.num_sms = options.num_sms;
  settings.hidden.check = !options.no_hidden;
  settings.run_sanitizer = !options.no_sanitizer;
  settings.hidden.time = options.time_hidden;
  settings.hidden.reveal = options.reveal_hidden;
  settings.run_seed = options.seed && *options.seed != 0 ? *options.seed : evaluator::draw_run_seed();
  // An oversized response is a value: the evaluator's parse stage says so in the verdict.
  auto response = evaluator::read_response(options.response_path, settings.parse);
  if (!response) {
    fmt::print(stderr, "ptxbench: {}\n", response.error());
    return kExitEnvironment;
  }
  evaluator::Verdict v = evaluator::evaluate(*task, *response, settings);
  if (options.feedback) {
    // The repair prompt the run loop would send after this verdict (default prompt templates).
    auto builder = agent::PromptBuilder::load(agent::PromptBuilder::default_dir());
    if (!builder) {
      fmt::print(stderr, "ptxbench: cannot load prompt templates: {}\n", builder.error());
      return kExitEnvironment;
    }
    fmt::print(stderr, "== feedback the model would get ==\n{}\n", builder->feedback(*task, v));
  }
  if (options.as_json) {
    fmt::print("{}\n", v.to_json().dump(2));
  } else {
    fmt::print("{}: {}   (kernel {}, {:.2f} s)\n", task->id, evaluator::to_string(v.status),
               v.kernel_hash.empty() ? "-" : v.kernel_hash, v.wall_seconds);
    if (settings.run_gpu)
      fmt::print("  run seed {} (--seed {} gives the same inputs again)\n", settings.run_seed,
                 settings.run_seed);
    print_stage("parse", v.parse);
    print_stage("static", v.static_checks);
    print_stage("compile", v.compile);
    print_stage("correctness", v.correctness);
    print_stage("execution", v.execution);
    print_stage("timing", v.timing);
    if (v.sanitizer.status != Status::skipped) print_stage("sanitizer", v.sanitizer);
    fmt::print("  axes: correct {}, targets executed {}, speedup {}\n", axis_text(v.axes.correct),
               axis_text(v.axes.targets_executed),
               v.axes.speedup ? fmt::format("{:.3f}x", *v.axes.speedup) : std::string("not measured"));
  }
  return v.status == Status::ok ? kExitOk : kExitVerdictFailed;
}

}  // namespace

void register_eval_command(CLI::App &app, Action &action) {
  auto options = std::make_shared<EvalOptions>();
  CLI::App *cmd = app.add_subcommand(
      "eval",
      "Evaluate one model response (a ```ptx or ```cuda block and a ```json launch manifest) for a task.\n"
      "Exit codes: 0 verdict ok (GPU stages may be skipped), 1 verdict not ok, 2 usage, 3 missing "
      "task/file/tool.");
  cmd->add_option("--task", options->task_id, "Task id, e.g. gemm_n7168_k5120")->required();
  cmd->add_option("--response", options->response_path, "File holding the model's response ('-' = stdin)")
      ->required();
  cmd->add_flag("--json", options->as_json, "Print the verdict as JSON");
  cmd->add_flag("--no-gpu", options->no_gpu, "Skip the GPU stages (correctness, execution, timing)");
  cmd->add_option(
      "--tasks-dir", options->tasks_dir,
      "Folder of task files (default: $PTXBENCH_TASKS, the installed share dir, or the source tree's "
      "tasks/)");
  cmd->add_option("--ptxas-timeout", options->ptxas_timeout_s, "Wall-clock limit for ptxas, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cooldown-ratio", options->cooldown_ratio,
                  "Timing: the GPU idles this multiple of each timed launch's time after it, at most 1 ms (0 "
                  "= back to back)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option(
         "--num-sms", options->num_sms,
         "The SM count manifests' num_sms resolves to (default 0: the task's reference GPU, e.g. 132 "
         "for the H200 SXM; an H100 PCIe has 114)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_flag(
      "--feedback", options->feedback,
      "Also print, on stderr, the feedback message the run loop would send the model for this verdict");
  cmd->add_flag("--no-sanitizer", options->no_sanitizer,
                "Skip the compute-sanitizer rerun of a fault, hang or race (as a service request's "
                "settings.sanitizer false)");
  cmd->add_flag("--no-hidden", options->no_hidden,
                "Do not check the task's hidden workloads (the verdict's generalizes stays unchecked)");
  cmd->add_option(
      "--seed", options->seed,
      "Run seed for the GPU stages' random inputs (the same seed, task and kernel give the same "
      "inputs and verdict); default: drawn, printed and recorded in the verdict's settings.run_seed");
  cmd->add_flag("--time-hidden", options->time_hidden,
                "Also time each hidden workload the kernel gets right (figures in stages.generalization)");
  cmd->add_flag("--reveal-hidden", options->reveal_hidden,
                "Feedback on a failing hidden workload names its symbol values (default: only the ranges)");
  cmd->callback([&action, options] { action.run = [options] { return run_eval(*options); }; });
}

}  // namespace ptxbench::cli
