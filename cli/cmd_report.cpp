// `ptxbench report RUN_DIR... --out DIR`: model comparisons with 95%
// intervals: report.md, CSV files, one self-contained report.html and a page
// per trajectory. `ptxbench show RUN_DIR` prints trajectories turn by turn.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "traces/record.hpp"
#include "traces/report.hpp"
#include "traces/shards.hpp"
#include "traces/trajectory_view.hpp"
#include "util/expected.hpp"

namespace ptxbench::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> run_dirs;
  std::string out;
  traces::ReportOptions options;
  std::vector<std::string> compare;  ///< two model names, or none
  std::vector<std::string> prices;   ///< NAME=PROMPT_USD,COMPLETION_USD (per million tokens)
};

/// "name=3,15" -> price; error text when malformed.
util::Expected<std::pair<std::string, traces::Price>> parse_price(const std::string &text) {
  const auto eq = text.rfind('=');
  const auto comma = text.find(',', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || comma == std::string::npos)
    return util::unexpected("--price expects NAME=PROMPT_USD,COMPLETION_USD (per million tokens), got '" +
                            text + "'");
  try {
    std::size_t used_in = 0, used_out = 0;
    const std::string in = text.substr(eq + 1, comma - eq - 1), out = text.substr(comma + 1);
    double pin = std::stod(in, &used_in), pout = std::stod(out, &used_out);
    if (used_in != in.size() || used_out != out.size() || pin < 0 || pout < 0)
      throw std::invalid_argument(text);
    return std::make_pair(text.substr(0, eq), traces::Price{pin, pout});
  } catch (const std::exception &) {
    return util::unexpected("--price: prices must be numbers >= 0 (USD per million tokens), got '" + text +
                            "'");
  }
}

void print_comparison(const traces::Comparison &c) {
  fmt::print("  {} - {} (paired bootstrap 95% interval):\n", c.model_a, c.model_b);
  for (const auto &row : c.rows) {
    auto ci = [](const std::optional<traces::Interval> &i) {
      return i ? fmt::format(" [{:+.3f}, {:+.3f}]", i->lo, i->hi) : std::string();
    };
    fmt::print(
        "    {:<24} pairs {:>4}  pass@1 {:.3f} vs {:.3f}: {:+.3f}{}  fast_1.0 {:.3f} vs {:.3f}: {:+.3f}{}\n",
        row.task, row.pairs, row.pass1_a, row.pass1_b, row.pass1_diff, ci(row.pass1_diff_ci), row.fast1_a,
        row.fast1_b, row.fast1_diff, ci(row.fast1_diff_ci));
  }
}

int run_report(const ReportArgs &in) {
  ReportArgs a = in;
  if (!a.compare.empty()) a.options.compare = {{a.compare[0], a.compare[1]}};
  for (const auto &text : a.prices) {
    auto price = parse_price(text);
    if (!price) {
      fmt::print(stderr, "ptxbench report: {}\n", price.error());
      return kExitUsage;
    }
    a.options.prices[price->first] = price->second;
  }
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
    auto correct_ci = traces::wilson_interval(g->end.correct, g->trajectories);
    fmt::print("  {}: correct {}/{} [95% {:.2f}-{:.2f}], executed {}/{}, geomean speedup {}{}\n", m,
               g->end.correct, g->trajectories, correct_ci ? correct_ci->lo : 0.0,
               correct_ci ? correct_ci->hi : 0.0, g->end.executed, g->trajectories,
               g->geomean_speedup ? fmt::format("{:.3f}x", *g->geomean_speedup) : "n/a",
               g->cost_per_success ? fmt::format(", ${:.4f} per success", *g->cost_per_success) : "");
  }
  if (report->repairs) {
    const auto &rep = *report->repairs;
    const auto ci = rep.all.interval();
    const auto tokens = rep.tokens_per_kept_example();
    const auto cost = rep.cost_per_kept_example();
    fmt::print(
        "  repairs: fixed {}/{} [95% {:.2f}-{:.2f}] ({} of {} student failures), {} tokens{} per kept "
        "example\n",
        rep.all.fixed, rep.all.trajectories, ci ? ci->lo : 0.0, ci ? ci->hi : 0.0, rep.seeds_fixed, rep.seeds,
        tokens ? fmt::format("{:.0f}", *tokens) : "-", cost ? fmt::format(", ${:.4f}", *cost) : "");
  }
  if (!a.compare.empty())
    for (const auto &c : report->comparisons) print_comparison(c);
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
  cmd->add_option(
         "run_dirs", args->run_dirs,
         "Run directories (run.json + trajectories.jsonl), or directories of shards (`slurm submit`)")
      ->required();
  cmd->add_option("--out", args->out, "Output directory (created)")->required();
  cmd->add_option("--fast", args->options.fast_thresholds, "Speedup thresholds p of fast_p (comma list)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--pass-k", args->options.pass_k, "k values of pass@k (comma list)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--compare", args->compare,
                  "Two models: print their paired difference in pass@1 and fast_1.0 per task and overall\n"
                  "(the report's comparison section then holds only this pair)")
      ->expected(2);
  cmd->add_option("--bootstrap", args->options.bootstrap.resamples,
                  "Bootstrap resamples for the pass@k, geomean and difference intervals (0 = none)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--seed", args->options.bootstrap.seed, "Seed of the bootstrap (recorded in the report)")
      ->capture_default_str();
  cmd->add_option("--price", args->prices,
                  "NAME=PROMPT,COMPLETION: USD per million tokens for endpoint NAME (overrides run.json; "
                  "repeatable)");
  cmd->callback([&action, args] { action.run = [args] { return run_report(*args); }; });
}

namespace {

struct ShowArgs {
  std::string run_dir;
  std::string model, task;
  std::optional<int> sample, turn;
};

int run_show(const ShowArgs &a) {
  auto run = traces::load_run(a.run_dir);
  if (!run) {
    fmt::print(stderr, "ptxbench show: {}\n", run.error());
    return kExitEnvironment;
  }
  std::vector<traces::LoadedRun> runs;
  runs.push_back(std::move(*run));
  const auto pages = traces::build_trajectory_pages(runs, traces::prices_of_runs(runs));
  std::vector<const traces::TrajectoryPage *> matching;
  for (const auto &p : pages) {
    if ((a.model.empty() || p.model == a.model) && (a.task.empty() || p.task_id == a.task) &&
        (!a.sample || p.sample == *a.sample))
      matching.push_back(&p);
  }
  if (matching.empty()) {
    fmt::print(stderr, "ptxbench show: no trajectory matches in {} ({} trajectories)\n", a.run_dir,
               pages.size());
    return kExitUsage;
  }
  if (matching.size() > 1) {
    fmt::print("{} trajectories match; pick one with --model, --task and --sample:\n", matching.size());
    for (const auto *p : matching) {
      std::string statuses;
      for (const auto &t : p->turns) statuses += (statuses.empty() ? "" : " ") + t.status;
      fmt::print("  --model {} --task {} --sample {}   {}\n", p->model, p->task_id, p->sample, statuses);
    }
    return kExitOk;
  }
  const auto *p = matching.front();
  if (a.turn &&
      std::none_of(p->turns.begin(), p->turns.end(), [&](const auto &t) { return t.turn == *a.turn; })) {
    fmt::print(stderr, "ptxbench show: {} has no turn {} (it has {})\n", p->trajectory_id, *a.turn,
               p->turns.size());
    return kExitUsage;
  }
  fmt::print("{}", traces::render_trajectory_text(*p, a.turn));
  return kExitOk;
}

}  // namespace

void register_show_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<ShowArgs>();
  CLI::App *cmd = app.add_subcommand(
      "show",
      "Print one trajectory turn by turn: the feedback the model received, its reasoning, the kernel and\n"
      "its diff against the previous turn, the verdict's axes and key figures, times and cost.\n"
      "Lists the matching trajectories when more than one matches.");
  cmd->add_option("run_dir", args->run_dir, "Run directory (run.json + trajectories.jsonl)")->required();
  cmd->add_option("--model", args->model, "Model (endpoint name)");
  cmd->add_option("--task", args->task, "Task id");
  cmd->add_option("--sample", args->sample, "Sample index (0-based)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--turn", args->turn, "Only this turn (0-based)")->check(CLI::NonNegativeNumber);
  cmd->callback([&action, args] { action.run = [args] { return run_show(*args); }; });
}

}  // namespace ptxbench::cli
