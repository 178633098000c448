// Model comparisons from run directories: per model × task and
// overall compile / correct / targets-executed / fast_p rates by turn and at
// the end, pass@k, speedup summaries, the failure taxonomy per turn and cost
// per success, each with a 95% interval; paired differences between models; where the time goes (the
// bound unit and the tensor pipe of each trajectory's final correct attempt, from its profile stage);
// rendered as Markdown, CSV, one self-contained HTML page and a page per
// trajectory.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "traces/profile_facts.hpp"
#include "traces/record.hpp"
#include "traces/repairs.hpp"
#include "traces/stats.hpp"
#include "traces/trajectory_view.hpp"
#include "util/expected.hpp"

namespace ptxbench::traces {

struct ReportOptions {
  std::vector<double> fast_thresholds{0.5, 0.8, 1.0,
                                      1.2};  ///< speedup ratios p of fast_p (correct and speedup > p)
  std::vector<int> pass_k{1, 2, 5, 10};      ///< k of pass@k; a k above a pair's sample count is left out
  BootstrapSettings bootstrap;               ///< intervals of pass@k, geomean speedup and model differences
  /// Endpoint name -> price; overrides the run config's "prices" (run.json) for that name.
  std::map<std::string, Price> prices;
  /// Models whose difference is reported; empty = every pair of models that ran a common task.
  std::vector<std::pair<std::string, std::string>> compare;
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

/// Median and spread of a figure over attempts (type-7 quantiles of the values).
struct Spread {
  int n = 0;  ///< attempts with a value
  double median = 0, p25 = 0, p75 = 0, min = 0, max = 0;
};

/// Where the time goes, over each trajectory's final correct attempt (the last turn with axes.correct
/// true; trajectories never correct are not counted): the profile stage's bound unit (the throughput
/// metric closest to its peak) and the tensor pipe's share of its peak, beside the library's figure.
/// Attempts without a profile (no GPU, the stage off or skipped, older verdicts) are "not profiled":
/// never counted as 0.
struct ProfileDistribution {
  int attempts = 0;      ///< final correct attempts (one per trajectory that was correct at some turn)
  int profiled = 0;      ///< of them, those with a profile record
  int not_profiled = 0;  ///< attempts - profiled
  int malformed = 0;     ///< of not_profiled, those whose profile record the codec refused
  struct Unit {
    std::string label;                     ///< the metric in words ("tensor pipe")
    int attempts = 0;                      ///< profiled attempts bound by it
    std::vector<double> values;            ///< its % of peak in each of them
    std::optional<double> median() const;  ///< of values; nullopt when there are none
  };
  std::map<std::string, Unit> bound_units;  ///< Nsight Compute metric name -> attempts bound by it
  int bound_unknown = 0;                    ///< profiled attempts without any throughput metric
  std::optional<Spread> tensor_pipe;        ///< candidate's tensor-pipe share (% of peak), profiled attempts
  std::optional<Spread> library_tensor_pipe;  ///< the library's figure, same attempts where measured
  int tensor_pipe_missing = 0;  ///< profiled attempts whose GPU did not offer the tensor-pipe metric

  /// The unit that bound the most attempts (ties: the first by name); nullptr when none was profiled.
  const std::pair<const std::string, Unit> *top_unit() const;
};

/// The final correct attempt of one trajectory, with its profile (profiles.csv).
struct ProfiledAttempt {
  std::string model, task, trajectory_id;
  int turn = 0;
  AttemptProfile profile;
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
  double wall_seconds = 0;  ///< request + CPU stages + GPU stage, summed over attempts
  int successes = 0;        ///< trajectories correct at some turn
  /// Trajectories with an attempt whose hidden workloads were checked (correct on the shown ones, on a
  /// task with hidden workloads), and those whose last such attempt was right on every hidden one.
  int generalization_checked = 0, generalizing = 0;
  /// Attempts whose correctness stage flagged a workload borderline (largest error near the tolerance:
  /// extra trials ran), and of them those whose verdict is incorrect (some trial failed). Counted per
  /// attempt, reused verdicts included, so two models can be compared on how often they sit at the edge.
  int borderline_attempts = 0, borderline_incorrect = 0;
  std::optional<double> tokens_per_success;        ///< (prompt + completion) / successes
  std::optional<double> wall_seconds_per_success;  ///< wall_seconds / successes
  // Intervals (95% unless ReportOptions::bootstrap.level says otherwise). Rates take Wilson intervals
  // from their counts at render time (wilson_interval); these are the bootstrap ones, over
  // trajectories resampled within each model × task pair.
  std::map<int, Interval> pass_correct_ci, pass_fast1_ci;
  std::optional<Interval> geomean_speedup_ci;
  // Cost: USD from endpoint usage and the endpoint's price; absent when a model in the group has no
  // price. Request times: the chat request (retries included) and, on streamed requests, the first
  // streamed byte (time to first token).
  std::optional<double> cost_usd;
  std::optional<double> cost_per_attempt, cost_per_trajectory, cost_per_success;
  std::optional<double> mean_request_seconds;  ///< per attempt with a request time recorded
  std::optional<double> mean_ttft_seconds;     ///< per streamed attempt with a first-byte time recorded
  int ttft_samples = 0;
  ProfileDistribution profile;  ///< bound unit and tensor pipe over the final correct attempts
  int gpu_measured_attempts =
      0;  ///< attempts whose correctness stage ran (0: the GPU axes are "not measured")
  /// Trajectories whose every turn failed for the endpoint's reason (request_failed, no answer): not the
  /// model's outcome, so left out of `trajectories` and every rate (`ptxbench resume` retries them).
  int request_failed_trajectories = 0;
};

/// Difference between two models on the tasks both ran: pass@1 (correct at the end of the trajectory)
/// and fast_1.0 pass@1, A minus B, with a paired bootstrap interval: trajectories are paired by task
/// and sample index, and pairs are resampled within each task.
struct ComparisonRow {
  std::string task;  ///< "all" = mean over the common tasks (each task weighs the same)
  int pairs = 0;     ///< paired trajectories (summed over tasks for "all")
  double pass1_a = 0, pass1_b = 0, pass1_diff = 0;
  double fast1_a = 0, fast1_b = 0, fast1_diff = 0;
  std::optional<Interval> pass1_diff_ci, fast1_diff_ci;
  /// Generalization (GroupReport::generalizing / generalization_checked) of each model on the task (or all
  /// common tasks), as counts: the renderer gives each its Wilson interval. 0/0: no hidden workloads checked.
  int gen_checked_a = 0, gen_a = 0, gen_checked_b = 0, gen_b = 0;
  /// Pairs whose A (B) trajectory had its GPU stages run at least once. 0: that side's pass@1 and fast_1.0
  /// were never measured (a CPU-only run), so they and the differences render as "not measured", not 0.
  int measured_a = 0, measured_b = 0;
};
struct Comparison {
  std::string model_a, model_b;
  std::vector<ComparisonRow> rows;  ///< one per common task, then "all"
};

struct SpeedupPoint {
  std::string model, task, trajectory_id;
  int turn = 0;
  double speedup = 0;
  AttemptProfile profile;  ///< its bound unit and tensor pipe (speedups.csv)
};

struct Report {
  ReportOptions options;
  std::vector<std::string> sources;  ///< run directories
  std::vector<std::string> models, tasks;
  int turns = 0;  ///< number of turn rows (max turn index + 1)
  /// Per model × task, then per model over all tasks, per task over all models, then overall ("all", "all").
  std::vector<GroupReport> groups;
  std::vector<SpeedupPoint> speedups;              ///< every attempt counted in a geomean
  std::vector<ProfiledAttempt> profiled_attempts;  ///< every trajectory's final correct attempt
  std::vector<Comparison> comparisons;
  std::map<std::string, Price> prices;    ///< the prices used, per endpoint name
  std::vector<TrajectoryPage> pages;      ///< every trajectory, turn by turn (the viewer pages)
  std::optional<RepairOutcomes> repairs;  ///< runs made by `ptxbench repairs`: the teacher's fix rates
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

/// Error only when the runs hold no usable turn record (empty run, other format version), or when
/// options.compare names a model the runs do not hold.
util::Expected<Report> build_report(const std::vector<LoadedRun> &runs, const ReportOptions &options = {});

std::string render_markdown(const Report &report);
/// File name -> CSV text: summary.csv, by_turn.csv, pass_at_k.csv, failures.csv, speedups.csv,
/// profiles.csv, comparison.csv (when there is a comparison).
std::map<std::string, std::string> render_csv(const Report &report);
/// One self-contained page: inline CSS and SVG, no scripts, no external resources.
std::string render_html(const Report &report);

/// Writes report.md, the CSV files, report.html and one page per trajectory under trajectories/ into
/// out_dir (created if needed); returns the paths (the trajectory pages as their folder).
util::Expected<std::vector<std::filesystem::path>> write_report(const Report &report,
                                                                const std::filesystem::path &out_dir);

}  // namespace ptxbench::traces
