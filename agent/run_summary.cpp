// The end-of-run table: per model and task, how many trajectories compiled, were correct and executed
// their target instructions, read back from the run's typed turn records.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/core.h>

#include "agent/runner.hpp"
#include "traces/outcome.hpp"

namespace ptxbench::agent {

namespace {

using Json = nlohmann::json;

struct Acc {
  SummaryRow row;
  std::set<int> samples, compiled, correct, executed;
};

/// Adds one (latest) record's outcome to its model × task row.
void add_record(Acc &acc, const traces::TurnRecord &r) {
  acc.samples.insert(r.sample);
  acc.row.turns += 1;
  if (r.response) acc.row.tokens += r.response->usage.total();
  if (r.verdict_object() == nullptr) return;
  // The outcome as the report and exports count it (traces/outcome.hpp).
  const traces::TurnOutcome outcome = traces::outcome_of(r);
  if (outcome.compiled) acc.compiled.insert(r.sample);
  if (const auto v = r.decoded_verdict(); v && v->correctness.status == protocol::Status::skipped)
    acc.row.gpu_skipped_turns += 1;
  if (outcome.correct == true) {
    acc.correct.insert(r.sample);
    if (const auto s = outcome.speedup; s && (!acc.row.best_speedup || *s > *acc.row.best_speedup))
      acc.row.best_speedup = s;
  }
  if (outcome.targets_executed == true) acc.executed.insert(r.sample);
}

}  // namespace

RunSummary summarize(const traces::LoadedRun &run) {
  std::map<std::pair<std::string, std::string>, Acc> by_key;
  std::map<std::string, bool> finished;  // trajectory id -> last stop_reason non-empty
  std::map<std::string, int> last_turn;
  // A turn resume sent again after a request failure has two records: the later one counts.
  std::map<std::pair<std::string, int>, const traces::TurnRecord *> latest;
  for (const auto &r : run.turns) latest[{r.trajectory_id, r.turn}] = &r;
  for (const auto &r : run.turns) {
    if (latest[{r.trajectory_id, r.turn}] != &r) continue;
    const std::string model = traces::model_label(r);
    const std::string task = r.task_id.empty() && !r.has_identity ? "?" : r.task_id;
    auto &acc = by_key[{model, task}];
    acc.row.model = model;
    acc.row.task_id = task;
    if (!last_turn.count(r.trajectory_id) || r.turn >= last_turn[r.trajectory_id]) {
      last_turn[r.trajectory_id] = r.turn;
      finished[r.trajectory_id] = !r.stop_reason.empty();
    }
    add_record(acc, r);
  }
  RunSummary summary;
  for (auto &[key, acc] : by_key) {
    acc.row.trajectories = static_cast<int>(acc.samples.size());
    acc.row.compiled = static_cast<int>(acc.compiled.size());
    acc.row.correct = static_cast<int>(acc.correct.size());
    acc.row.executed = static_cast<int>(acc.executed.size());
    summary.turns += acc.row.turns;
    summary.rows.push_back(acc.row);
  }
  summary.trajectories = static_cast<int>(finished.size());
  for (const auto &[id, f] : finished) summary.finished_trajectories += f ? 1 : 0;
  return summary;
}

std::string RunSummary::table() const {
  std::size_t wm = 5, wt = 4;
  for (const auto &r : rows) {
    wm = std::max(wm, r.model.size());
    wt = std::max(wt, r.task_id.size());
  }
  auto rate = [](int n, int d) {
    return d == 0 ? std::string("-") : fmt::format("{}/{} {:3.0f}%", n, d, 100.0 * n / d);
  };
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:>12}  {:>12}  {:>8}\n", "model", wm, "task",
                                wt, "turns", "compiled", "correct", "executed", "best x");
  for (const auto &r : rows) {
    const bool no_gpu = r.gpu_skipped_turns > 0 && r.correct == 0 && r.executed == 0;
    out += fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:>12}  {:>12}  {:>8}\n", r.model, wm, r.task_id, wt,
                       r.turns, rate(r.compiled, r.trajectories),
                       no_gpu ? std::string("no GPU") : rate(r.correct, r.trajectories),
                       no_gpu ? std::string("no GPU") : rate(r.executed, r.trajectories),
                       r.best_speedup ? fmt::format("{:.2f}", *r.best_speedup) : std::string("-"));
  }
  return out;
}

}  // namespace ptxbench::agent
