// `ptxbench repairs --from RUN_DIR... --teacher CONFIG`: repair-conditioned
// training data. Failed student turns are selected (coverage table printed
// first), then a repairs run sends each to the teacher as the student's
// conversation up to its feedback, K samples of up to T turns, evaluated by
// the same evaluator as `run`. The result is an ordinary run directory.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/repair_selection.hpp"
#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "cli/cli.hpp"
#include "cli/run_session.hpp"
#include "traces/shards.hpp"
#include "util/files.hpp"

namespace ptxbench::cli {
namespace {

namespace fs = std::filesystem;

struct RepairsArgs {
  std::vector<std::string> students;
  std::string teacher_config;
  int samples = 1;
  int turns = 2;
  std::string out;
  agent::RepairSelectionSettings selection;
  std::optional<double> min_speedup;
  bool synthesize_reasoning = false;
  bool no_gpu = false;
  bool prepare_only = false;
  std::string progress = "auto";
};

std::string default_out_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::random_device rd;
  return fmt::format("runs/repairs-{}-{:04x}", stamp, rd() & 0xffff);
}

/// Loads the student runs, selects their failed turns and prints the coverage table. An exit code when
/// there is nothing to send the teacher.
std::optional<int> select_seeds(const RepairsArgs &a, traces::LoadedRuns &loaded,
                                agent::RepairSelection &selection) {
  auto runs = traces::load_runs({a.students.begin(), a.students.end()});
  if (!runs) {
    fmt::print(stderr, "ptxbench repairs: {}\n", runs.error());
    return kExitEnvironment;
  }
  loaded = std::move(*runs);
  for (const auto &w : loaded.warnings) fmt::print(stderr, "ptxbench repairs: warning: {}\n", w);
  auto selected = agent::select_repairs(loaded.runs, a.selection, agent::default_feedback_regenerator());
  if (!selected) {
    fmt::print(stderr, "ptxbench repairs: {}\n", selected.error());
    return kExitEnvironment;
  }
  selection = std::move(*selected);
  fmt::print("{}\n", selection.table());
  std::fflush(stdout);  // the table comes before the run's progress on stderr
  if (selection.seeds.empty()) {
    fmt::print(stderr,
               "ptxbench repairs: no failed student turn was selected; nothing to send the teacher\n");
    return kExitUsage;
  }
  return std::nullopt;
}

/// A new run directory: an exit code when it already holds a run or cannot be made.
std::optional<int> make_out_dir(const fs::path &out) {
  std::error_code ec;
  if (fs::exists(out / "trajectories.jsonl", ec)) {
    fmt::print(stderr, "ptxbench repairs: {} already holds a run; continue it with `ptxbench resume {}`\n",
               out.string(), out.string());
    return kExitUsage;
  }
  fs::create_directories(out, ec);
  if (ec) {
    fmt::print(stderr, "ptxbench repairs: cannot create {}: {}\n", out.string(), ec.message());
    return kExitEnvironment;
  }
  return std::nullopt;
}

/// The teacher's config, made a repairs run: its endpoints, sampling, prices and evaluator settings;
/// the seeds' tasks; a fix is correct with targets executed (and fast enough when asked).
void make_repairs_run(agent::RunConfig &c, const RepairsArgs &a, const traces::LoadedRuns &loaded,
                      const agent::RepairSelection &selection, const fs::path &out,
                      const fs::path &seeds_file, const std::string &seeds_text) {
  c.samples = a.samples;
  c.turns = a.turns;
  c.stop = agent::StopTarget{true, true, a.min_speedup};
  std::set<std::string> task_ids;
  for (const auto &s : selection.seeds) task_ids.insert(s.task_id);
  c.tasks.assign(task_ids.begin(), task_ids.end());
  c.out_dir = out;
  if (a.no_gpu) c.evaluator.run_gpu = false;
  agent::RepairsConfig repairs;
  repairs.seeds_file = seeds_file;
  repairs.seeds_hash = util::fnv1a64_hex(seeds_text);
  repairs.synthesize_reasoning = a.synthesize_reasoning;
  for (const auto &run : loaded.runs) repairs.student_runs.push_back(fs::absolute(run.dir).string());
  repairs.selection = selection.summary_json();
  c.repairs = std::move(repairs);
}

int start_repairs_run(agent::RunConfig c, const std::string &progress, const fs::path &out) {
  install_run_signal_handlers();
  auto runner = agent::Runner::start(std::move(c), agent::RunServices::defaults(), run_options_for(progress));
  if (!runner) {
    fmt::print(stderr, "ptxbench repairs: {}\n", runner.error());
    return kExitEnvironment;
  }
  fmt::print(stderr, "ptxbench repairs: writing {}\n", (*runner)->dir().string());
  const int rc = finish_run_session((*runner)->run());
  fmt::print(
      "Next: ptxbench report {} --out REPORT_DIR; ptxbench export {} --format repair-pairs --out FILE\n",
      out.string(), out.string());
  return rc;
}

int run_repairs(const RepairsArgs &a) {
  traces::LoadedRuns loaded;
  agent::RepairSelection selection;
  if (auto rc = select_seeds(a, loaded, selection)) return *rc;

  auto config = agent::load_run_config(a.teacher_config);
  if (!config) {
    fmt::print(stderr, "ptxbench repairs: {}\n", config.error());
    return kExitUsage;
  }
  if (!config->variants.empty()) {
    fmt::print(stderr, "ptxbench repairs: the teacher config has variants; a repairs run takes one arm\n");
    return kExitUsage;
  }
  const fs::path out = a.out.empty() ? fs::path(default_out_dir()) : fs::path(a.out);
  if (auto rc = make_out_dir(out)) return *rc;
  const std::string seeds_text = agent::seeds_jsonl(selection.seeds);
  const fs::path seeds_file = fs::absolute(out / "repair_seeds.jsonl");
  if (auto ok = util::write_file_atomic(seeds_file, seeds_text); !ok) {
    fmt::print(stderr, "ptxbench repairs: cannot write {}: {}\n", seeds_file.string(), ok.error());
    return kExitEnvironment;
  }
  agent::RunConfig &c = *config;
  make_repairs_run(c, a, loaded, selection, out, seeds_file, seeds_text);
  if (auto ok = agent::validate(c); !ok) {
    fmt::print(stderr, "ptxbench repairs: {}\n", ok.error());
    return kExitUsage;
  }
  // The same config as a file: `ptxbench run --config <it> --shard I/N` and `slurm submit` take it.
  const fs::path config_file = out / "repairs_config.json";
  if (auto ok = util::write_file_atomic(config_file, c.to_json().dump(2) + "\n"); !ok) {
    fmt::print(stderr, "ptxbench repairs: cannot write {}: {}\n", config_file.string(), ok.error());
    return kExitEnvironment;
  }
  fmt::print("Wrote {} seed(s) to {} and the run config to {}\n", selection.seeds.size(), seeds_file.string(),
             config_file.string());
  if (a.prepare_only) {
    fmt::print(
        "Not started (--prepare-only): `ptxbench run --config {}` runs it; add --shard I/N --out DIR "
        "for one shard, or use `ptxbench slurm submit --config {}`\n",
        config_file.string(), config_file.string());
    return kExitOk;
  }
  return start_repairs_run(std::move(c), a.progress, out);
}

}  // namespace

void register_repairs_command(CLI::App &app, Action &action) {
  auto args = std::make_shared<RepairsArgs>();
  CLI::App *cmd = app.add_subcommand(
      "repairs",
      "Repair-conditioned training data: failed student turns (any status but ok, or correct with the\n"
      "target instructions not executed) go to a teacher as the student's conversation up to the feedback;\n"
      "the teacher gets K samples of up to T turns of its own repair loop, every answer evaluated as in\n"
      "`run`. Prints the coverage table (selected, left out and why) before it starts. Writes an ordinary\n"
      "run directory (resume, report, export --format repair-pairs) whose records name the student run,\n"
      "trajectory and turn they repair.");
  cmd->add_option("--from", args->students, "student run directories (or directories of shards)")
      ->required()
      ->expected(1, -1);
  cmd->add_option(
         "--teacher", args->teacher_config,
         "run config (JSON) whose endpoints are the teachers: sampling, prices, evaluator as in `run`")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--samples", args->samples, "teacher samples per failed student turn")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--turns", args->turns, "turns of the teacher's own repair loop at most")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--out", args->out, "run directory (default runs/repairs-<time>)");
  cmd->add_option("--cap-per-category", args->selection.cap_per_category,
                  "at most N failed turns per failure category (0 = no cap)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cap-per-task", args->selection.cap_per_task,
                  "at most N failed turns per task (0 = no cap)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-seeds", args->selection.max_seeds, "at most N failed turns in all (0 = no cap)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", args->selection.seed,
                  "seeds which failed turns the caps keep (the order within each task, category and turn "
                  "stratum, and ties between strata); recorded")
      ->capture_default_str();
  cmd->add_option("--category", args->selection.categories,
                  "only these failure categories (e.g. compile_error,targets_not_executed)")
      ->delimiter(',');
  cmd->add_option("--min-speedup", args->min_speedup, "a repair must also reach this speedup")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--synthesize-reasoning", args->synthesize_reasoning,
                "when the teacher's server returns no reasoning, ask it once more to explain each verified "
                "repair (recorded as synthesized_reasoning)");
  cmd->add_flag("--no-gpu", args->no_gpu, "skip GPU stages (no repair can then be verified)");
  cmd->add_flag("--prepare-only", args->prepare_only,
                "select and write the seeds and repairs_config.json, print the coverage, do not start");
  cmd->add_option("--progress", args->progress, "auto | redraw | lines | quiet")
      ->check(CLI::IsMember({"auto", "redraw", "lines", "quiet"}));
  cmd->callback([&action, args] { action.run = [args] { return run_repairs(*args); }; });
}

}  // namespace ptxbench::cli
