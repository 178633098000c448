// `ptxbench report RUN_DIR... --out DIR`: model comparisons (issue 6):
// report.md, CSV files and one self-contained report.html.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "traces/record.hpp"
#include "traces/shards.hpp"
#include "traces/report.hpp"

namespace ptxbench::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> run_dirs;
  std::string out;
  traces::ReportOptions options;
};

int run_report(const ReportArgs &a) {
  // Top-level directories stand for their shards; the shards of a run read as one run.
  auto loaded = traces::load_runs({a.run_dirs.begin(), a.run_dirs.end()});
  if (!loaded) {
    fmt::print(stderr, "ptxbench report: {}\n", loaded.error());
    return kExitEnvironment;
  }
  for (const auto &w : loaded->warnings) fmt::print(stderr, "ptxbench report: warning: {}\n", w);
  std::vector<traces::LoadedRun> runs = std::move(loaded->runs);
  auto report = traces::build_report(runs, a.options);
  if (!report) {
    fmt::print(stderr, "ptxbench report: {}\n", report.error());
    return kExitEnvironment;
  }
  for (const auto &w : report->warnings) fmt::print(stderr, "ptxbench report: warning: {}\n", w);
  auto written = traces::write_report(*report, a.out);
  if (!written) {
    fmt::print(stderr, "ptxbench report: {}\n", written.error());
    return kExitEnvironment;
  }
  const traces::GroupReport *all = &report->overall();
  fmt::print("{} trajectories, {} attempts, {} model(s), {} task(s)", all->trajectories, all->attempts,
             report->models.size(), report->tasks.size());
  if (report->skipped_partial_lines)
    fmt::print(", {} partial line(s) skipped", report->skipped_partial_lines);
  fmt::print("\n");
  for (const auto &m : report->models) {
    const traces::GroupReport *g = report->find_model(m);
    fmt::print("  {}: correct {}/{}, executed {}/{}, geomean speedup {}\n", m, g->end.correct,
               g->trajectories, g->end.executed, g->trajectories,
               g->geomean_speedup ? fmt::format("{:.3f}x", *g->geomean_speedup) : "n/a");
  }
  for (const auto &p : *written) fmt::print("wrote {}\n", p.string());
  return kExitOk;
}

}  // namespace

void register_report_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App *cmd = app.add_subcommand(
      "report",
      "Compare models from run directories: compile / correct / executed / fast_p rates by turn, pass@k,\n"
      "speedups, failure taxonomy, tokens per success. Writes report.md, CSV files and report.html.");
  cmd->add_option("run_dirs", args->run_dirs, "Run directories (run.json + trajectories.jsonl), or directories of shards (`slurm submit`)")->required();
  cmd->add_option("--out", args->out, "Output directory (created)")->required();
  cmd->add_option("--fast", args->options.fast_thresholds, "Speedup thresholds p of fast_p (comma list)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--pass-k", args->options.pass_k, "k values of pass@k (comma list)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([&action, args] { action.run = [args] { return run_report(*args); }; });
}

}  // namespace ptxbench::cli
