// `ptxbench export RUN_DIR... --format F --out FILE`: training sets from run
// directories. The JSONL goes to FILE, the dataset card to
// FILE with extension .card.md and to stdout.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "traces/export.hpp"
#include "traces/record.hpp"
#include "traces/shards.hpp"
#include "util/files.hpp"

namespace ptxbench::cli {
namespace {

struct ExportArgs {
  std::vector<std::string> run_dirs;
  std::string out;
  std::string format = "messages";
  std::string per = "turn";
  std::string reasoning = "inline";
  std::vector<std::string> statuses, tasks, models, variants;
  std::vector<int> turns;
  std::string correct, executed, generalizes;  // "", "true" or "false"
  std::optional<double> min_speedup;
  traces::ExportBalance balance;
  traces::ExportLimits limits;
  double min_gain = 1.05;
  bool no_dedup = false;
  bool all = false;
};

/// "data.jsonl" -> "data.card.md"
std::filesystem::path card_path(const std::filesystem::path &out) {
  std::filesystem::path p = out;
  return p.replace_extension(".card.md");
}

int run_export(const ExportArgs &a) {
  traces::ExportOptions o;
  // The option checks below already restrict these strings; value_or keeps the defaults.
  o.format = traces::export_format_from_string(a.format).value_or(traces::ExportFormat::messages);
  o.unit = traces::export_unit_from_string(a.per).value_or(traces::ExportUnit::turn);
  o.reasoning = traces::reasoning_mode_from_string(a.reasoning).value_or(traces::ReasoningMode::inline_think);
  o.filter.statuses = a.statuses;
  o.filter.tasks = a.tasks;
  o.filter.models = a.models;
  o.filter.variants = a.variants;
  o.filter.turns = a.turns;
  if (!a.correct.empty()) o.filter.correct = a.correct == "true";
  if (!a.executed.empty()) o.filter.targets_executed = a.executed == "true";
  if (!a.generalizes.empty()) o.filter.generalizes = a.generalizes == "true";
  o.filter.min_speedup = a.min_speedup;
  o.balance = a.balance;
  o.limits = a.limits;
  o.improve_min_gain = a.min_gain;
  o.deduplicate = !a.no_dedup;
  o.all = a.all;
  if (a.per == "trajectory" &&
      (o.format == traces::ExportFormat::repair_pairs || o.format == traces::ExportFormat::improve_pairs)) {
    fmt::print(
        stderr,
        "ptxbench export: --per trajectory applies to messages and sharegpt only (pairs span two turns)\n");
    return kExitUsage;
  }

  // Top-level directories stand for their shards; the shards of a run read as one run.
  auto loaded = traces::load_runs({a.run_dirs.begin(), a.run_dirs.end()});
  if (!loaded) {
    fmt::print(stderr, "ptxbench export: {}\n", loaded.error());
    return kExitEnvironment;
  }
  for (const auto &w : loaded->warnings) fmt::print(stderr, "ptxbench export: warning: {}\n", w);
  std::vector<traces::LoadedRun> runs = std::move(loaded->runs);
  auto result = traces::build_export(runs, o);
  if (!result) {
    fmt::print(stderr, "ptxbench export: {}\n", result.error());
    return kExitEnvironment;
  }
  for (const auto &w : result->warnings) fmt::print(stderr, "ptxbench export: warning: {}\n", w);
  std::string jsonl;
  for (const auto &line : result->lines) jsonl += line + "\n";
  const std::filesystem::path out(a.out);
  if (out.has_parent_path()) {  // like `report --out`, the folder is made when missing
    std::error_code ec;
    std::filesystem::create_directories(out.parent_path(), ec);
    if (ec) {
      fmt::print(stderr, "ptxbench export: cannot create {}: {}\n", out.parent_path().string(), ec.message());
      return kExitEnvironment;
    }
  }
  if (auto ok = util::write_file_atomic(out, jsonl); !ok) {
    fmt::print(stderr, "ptxbench export: cannot write {}: {}\n", out.string(), ok.error());
    return kExitEnvironment;
  }
  const auto card = card_path(out);
  if (auto ok = util::write_file_atomic(card, result->card_markdown); !ok) {
    fmt::print(stderr, "ptxbench export: cannot write {}: {}\n", card.string(), ok.error());
    return kExitEnvironment;
  }
  fmt::print("{}\nWrote {} example(s) to {} and the card to {}\n", result->card_markdown,
             result->counts.written, out.string(), card.string());
  if (result->counts.written == 0) {
    fmt::print(stderr, "ptxbench export: warning: no example passed the filters (see the card's counts)\n");
  }
  return kExitOk;
}

}  // namespace

void register_export_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App *cmd = app.add_subcommand(
      "export",
      "Training data from run directories: chat messages (TRL/axolotl), ShareGPT (LLaMA-Factory),\n"
      "repair pairs (failed attempt + diagnostics -> fixed attempt) or improve pairs (correct -> faster).\n"
      "Filters apply to the target turn (the answer trained on). By default messages and sharegpt keep only\n"
      "target turns with status ok that are correct and whose target instructions executed; repair pairs'\n"
      "fixed turns must be correct and executed. --all (or an explicit "
      "--status/--correct/--executed/--min-speedup)\n"
      "replaces that default. Writes FILE and FILE's .card.md (which names the filter that applied).\n"
      "Over a `ptxbench repairs` directory, repair pairs are the student's failed attempt and its feedback,\n"
      "then the teacher's verified repair with its reasoning; the card adds the teacher's fix rates.");
  cmd->add_option(
         "run_dirs", args->run_dirs,
         "Run directories (run.json + trajectories.jsonl), or directories of shards (`slurm submit`)")
      ->required();
  cmd->add_option("--out", args->out, "Output JSONL file")->required();
  cmd->add_option("--format", args->format, "messages | sharegpt | repair-pairs | improve-pairs")
      ->check(CLI::IsMember({"messages", "sharegpt", "repair-pairs", "improve-pairs"}))
      ->capture_default_str();
  cmd->add_option("--per", args->per, "messages/sharegpt: one example per turn or per trajectory")
      ->check(CLI::IsMember({"turn", "trajectory"}))
      ->capture_default_str();
  cmd->add_option(
         "--reasoning", args->reasoning,
         "Model reasoning: inline as <think>...</think>, a separate reasoning_content field, or drop")
      ->check(CLI::IsMember({"inline", "field", "drop"}))
      ->capture_default_str();
  cmd->add_option("--status", args->statuses,
                  "Keep target turns with this verdict status (repeatable, comma list)")
      ->delimiter(',');
  cmd->add_option("--correct", args->correct, "Keep target turns whose correctness is true/false")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option("--executed", args->executed,
                  "Keep target turns whose target instructions executed: true/false")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option(
         "--generalizes", args->generalizes,
         "Keep target turns whose kernel was also right (true) or wrong (false) on the task's hidden "
         "workloads (turns not checked there never match)")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option("--min-speedup", args->min_speedup, "Keep target turns with status ok and speedup >= X")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--task", args->tasks, "Only these task ids (repeatable, comma list)")->delimiter(',');
  cmd->add_option("--model", args->models, "Only these models (repeatable, comma list)")->delimiter(',');
  cmd->add_option("--variant", args->variants, "Only these run variants (repeatable, comma list)")
      ->delimiter(',');
  cmd->add_option("--turn", args->turns, "Only these target turns, 0-based (repeatable, comma list)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cap-per-task", args->balance.cap_per_task, "At most N examples per task (0 = no cap)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cap-per-failure", args->balance.cap_per_failure,
                  "At most N examples per failure category of the source turn (0 = no cap)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", args->balance.seed, "Seed for which examples a cap keeps (stratified by turn)")
      ->capture_default_str();
  cmd->add_option("--max-chars", args->limits.max_chars, "Drop examples over N characters (0 = no limit)");
  cmd->add_option("--max-tokens", args->limits.max_tokens,
                  "Drop examples over N tokens (endpoint usage counts, metadata.token_count; 0 = no limit)");
  cmd->add_option("--min-gain", args->min_gain, "improve-pairs: faster attempt's speedup / slower one's >= X")
      ->check(CLI::Range(1.0, 1000.0))
      ->capture_default_str();
  cmd->add_flag("--no-dedup", args->no_dedup, "Keep examples whose normalized kernel hash was already seen");
  cmd->add_flag("--all", args->all,
                "Keep every target turn, incorrect and non-executing ones too (default: correct and executed "
                "only)");
  cmd->callback([&action, args] { action.run = [args] { return run_export(*args); }; });
}

}  // namespace ptxbench::cli
