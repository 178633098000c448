// Model comparisons from run directories (design §8, issue 6): per model ×
// task and overall compile / correct / targets-executed / fast_p rates by turn
// and at the end, pass@k, speedup summaries, the failure taxonomy per turn and
// cost per success; rendered as Markdown, CSV and one self-contained HTML page.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "traces/record.hpp"
#include "util/expected.hpp"

namespace ptxbench::traces {

struct ReportOptions {
  std::vector<double> fast_thresholds{0.5, 0.8, 1.0,
                                      1.2};  ///< speedup ratios p of fast_p (correct and speedup > p)
  std::vector<int> pass_k{1, 2, 5, 10};      ///< k of pass@k; a k above a pair's sample count is left out
};

/// Successes on each axis. An attempt counts as: compiled when ptxas produced a cubin;
/// correct when axes.correct is true; executed when axes.targets_executed is true; fast_p
/// when its status is ok, it is correct and its speedup is > p.
struct AxisCounts {
  int compiled = 0;
  int correct = 0;
  int executed = 0;
  std::vector<int> fast;  ///< one per ReportOptions::fast_thresholds
};

struct TurnRow {
  int turn = 0;
  int attempts = 0;        ///< turn records at this turn (trajectories that stopped earlier have none)
  AxisCounts per_attempt;  ///< among those attempts
  AxisCounts cumulative;   ///< trajectories that reached the axis at any turn ≤ this one
};

/// Which trajectories a group pools.
enum class GroupScope { model_task, model, task, overall };

struct GroupReport {
  GroupScope scope = GroupScope::model_task;
  std::string model;  ///< "all" when the group spans models (a model may itself be named "all": use scope)
  std::string task;   ///< "all" when the group spans tasks
  int trajectories = 0;
  int attempts = 0;
  std::vector<TurnRow> by_turn;  ///< turns 0 .. the report's max turn
  AxisCounts end;  ///< trajectories that reached the axis at any turn (= the last cumulative row)
  /// pass@k (unbiased) over samples of each model × task pair, averaged over the pairs in the group;
  /// correctness and fast_1.0 (status ok, correct, speedup > 1.0), each at the end of the trajectory.
  std::map<int, double> pass_correct, pass_fast1;
  std::optional<double> geomean_speedup;  ///< over attempts with status ok and correct, speedup measured
  std::optional<double> best_speedup;
  int speedup_samples = 0;
  std::vector<std::map<std::string, int>>
      failures_by_turn;  ///< turn -> verdict status (or request_failed) -> count
  long long prompt_tokens = 0, completion_tokens = 0, reasoning_tokens = 0;  ///< endpoint usage, summed
  double wall_seconds = 0;                         ///< request + CPU stages + GPU stage, summed over attempts
  int successes = 0;                               ///< trajectories correct at some turn
  std::optional<double> tokens_per_success;        ///< (prompt + completion) / successes
  std::optional<double> wall_seconds_per_success;  ///< wall_seconds / successes
  int gpu_measured_attempts =
      0;  ///< attempts whose correctness stage ran (0: the GPU axes are "not measured")
  /// Trajectories whose every turn failed for the endpoint's reason (request_failed, no answer): not the
  /// model's outcome, so left out of `trajectories` and every rate (`ptxbench resume` retries them).
  int request_failed_trajectories = 0;
};

struct SpeedupPoint {
  std::string model, task, trajectory_id;
  int turn = 0;
  double speedup = 0;
};

struct Report {
  ReportOptions options;
  std::vector<std::string> sources;  ///< run directories
  std::vector<std::string> models, tasks;
  int turns = 0;  ///< number of turn rows (max turn index + 1)
  /// Per model × task, then per model over all tasks, per task over all models, then overall ("all", "all").
  std::vector<GroupReport> groups;
  std::vector<SpeedupPoint> speedups;  ///< every attempt counted in a geomean
  int skipped_partial_lines = 0;
  std::vector<std::string> warnings;

  const GroupReport *find(const std::string &model,
                          const std::string &task) const;         ///< one model × task pair
  const GroupReport *find_model(const std::string &model) const;  ///< one model, all tasks
  const GroupReport *find_task(const std::string &task) const;    ///< one task, all models
  const GroupReport &overall() const;                             ///< everything
};

/// Unbiased pass@k estimator 1 - C(n-c, k) / C(n, k), computed as a product (no large binomials).
/// n samples, c of them successful; requires 0 <= c <= n and 1 <= k <= n.
double pass_at_k(int n, int c, int k);

/// Error only when the runs hold no usable turn record (empty run, other format version).
util::Expected<Report> build_report(const std::vector<LoadedRun> &runs, const ReportOptions &options = {});

std::string render_markdown(const Report &report);
/// File name -> CSV text: summary.csv, by_turn.csv, pass_at_k.csv, failures.csv, speedups.csv.
std::map<std::string, std::string> render_csv(const Report &report);
/// One self-contained page: inline CSS and SVG, no scripts, no external resources.
std::string render_html(const Report &report);

/// Writes report.md, the CSV files and report.html into out_dir (created if needed); returns the paths.
util::Expected<std::vector<std::filesystem::path>> write_report(const Report &report,
                                                                const std::filesystem::path &out_dir);

}  // namespace ptxbench::traces
