// One trajectory turn by turn, as a reader wants it: the feedback the model
// received, its reasoning, the kernel and its diff against the previous turn,
// the verdict's three axes with the figures that explain them (first
// mismatch, executed target counts, times) and the cost. The HTML viewer
// pages and `ptxbench show` render the same view.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traces/record.hpp"

namespace ptxbench::traces {

/// Price of an endpoint's tokens, USD per million tokens. Completion tokens are counted as the
/// endpoint reported them (OpenAI-style usage includes reasoning tokens in completion tokens).
struct Price {
  double prompt_per_mtok = 0;      ///< USD per 1e6 prompt tokens
  double completion_per_mtok = 0;  ///< USD per 1e6 completion tokens
};
/// USD of one request.
double cost_usd(const Price &price, long long prompt_tokens, long long completion_tokens);
/// Endpoint name -> price from each run's run.json ("config": {"prices": {name: {prompt_usd_per_mtok,
/// completion_usd_per_mtok}}}); a later run's entry for the same name wins. Malformed entries are left out.
std::map<std::string, Price> prices_of_runs(const std::vector<LoadedRun> &runs);

struct TurnView {
  int turn = 0;
  std::string status;  ///< verdict status, or request_failed
  std::optional<bool> correct, targets_executed;
  std::optional<bool> generalizes;  ///< the hidden workloads' result (nullopt: none, or not checked)
  std::optional<double> speedup;
  std::string feedback_received;  ///< the last user message of the request (the task itself on turn 0)
  std::string reasoning;
  std::string answer;                       ///< the response text (kernel blocks included)
  std::string language;                     ///< "ptx" | "cuda" | "" (no kernel parsed)
  std::string kernel;                       ///< kernel source ("" when none was parsed)
  std::optional<int> previous_kernel_turn;  ///< the turn the diff is against (the latest earlier kernel)
  std::string kernel_diff;  ///< unified-style line diff against that kernel ("" when there is none)
  bool kernel_unchanged = false;
  std::vector<std::string> stages;   ///< "compile: ok: 168 registers, ..." in pipeline order
  std::vector<std::string> figures;  ///< key figures: first mismatch, target counts, timing, times
  std::string request_error;         ///< "kind: message" when the request failed
  long long prompt_tokens = 0, completion_tokens = 0;
  std::optional<double> cost_usd;  ///< when the endpoint has a price
  std::optional<double> request_seconds, ttft_seconds, cpu_stages_seconds, gpu_stage_seconds;
  std::string feedback_given;  ///< what the harness answered (empty on the last turn)
  std::string stop_reason;
};

struct TrajectoryPage {
  std::string run_dir, run_id;
  std::string model, task_id, trajectory_id;
  int sample = 0;
  std::vector<TurnView> turns;
  std::string file;  ///< page path relative to the report folder: trajectories/<model>__<task>__<sample>.html
  /// Outcome at the end: correct / targets executed at any turn, and the best speedup of a correct attempt.
  bool reached_correct = false, reached_executed = false;
  std::optional<double> best_speedup;
  std::optional<double> cost_usd;
};

/// Every trajectory of the runs, ordered by run, model, task, sample. `prices` per endpoint name.
std::vector<TrajectoryPage> build_trajectory_pages(const std::vector<LoadedRun> &runs,
                                                   const std::map<std::string, Price> &prices);

/// Line diff of `before` -> `after`: common lines prefixed "  ", removed "- ", added "+ ", runs of more
/// than 2*context unchanged lines folded into "@@ N unchanged lines @@". Lines are compared exactly.
/// Inputs whose changed middle exceeds max_cells (lines x lines) are shown as a whole replacement.
std::string line_diff(std::string_view before, std::string_view after, int context = 3,
                      std::size_t max_cells = 4'000'000);

/// The page as terminal text; only turn `only_turn` when given.
std::string render_trajectory_text(const TrajectoryPage &page, std::optional<int> only_turn = std::nullopt);
/// The page as one self-contained HTML document (no scripts, no external resources); `back_href` links
/// to the summary page.
std::string render_trajectory_html(const TrajectoryPage &page, std::string_view back_href);

}  // namespace ptxbench::traces
