#include "traces/repairs.hpp"

#include <set>

#include <fmt/core.h>

#include "traces/detail/repair_view.hpp"
#include "traces/detail/run_view.hpp"
#include "traces/outcome.hpp"
#include "util/think_tags.hpp"

namespace ptxbench::traces {

using detail::Json;

namespace detail {

const RepairOf *repair_of(const TurnRecord &record) {
  return record.repair_of ? &*record.repair_of : nullptr;
}

const TurnRecord *kept_repair_turn(const TrajectoryView &t, bool require_target) {
  for (const TurnRecord *r : t.turns) {
    if (!repair_of(*r)) return nullptr;
    if (status_of(*r) != "ok" || correct_of(*r) != true) continue;
    if (!require_target) return r;
    if (r->stop_reason == "target_reached" && targets_executed_of(*r) == true) return r;
  }
  return nullptr;
}

std::string repair_reasoning_source(const TurnRecord &record) {
  if (const auto &response = record.response) {
    if (response->reasoning.find_first_not_of(" \t\r\n") != std::string::npos) return "teacher";
    if (!util::split_think_tags(response->content).reasoning.empty()) return "teacher";
  }
  if (const auto &s = record.synthesized_reasoning) {
    if (s->content.value_or("").find_first_not_of(" \t\r\n") != std::string::npos) return "synthesized";
  }
  return "none";
}

}  // namespace detail

bool has_repairs(const std::vector<LoadedRun> &runs) {
  for (const auto &run : runs)
    for (const auto &r : run.turns)
      if (detail::repair_of(r)) return true;
  return false;
}

std::optional<double> RepairOutcomes::tokens_per_kept_example() const {
  if (all.fixed == 0) return std::nullopt;
  return static_cast<double>(prompt_tokens + completion_tokens) / all.fixed;
}

std::optional<double> RepairOutcomes::cost_per_kept_example() const {
  if (all.fixed == 0 || !cost_usd) return std::nullopt;
  return *cost_usd / all.fixed;
}

RepairOutcomes summarize_repairs(const std::vector<LoadedRun> &runs,
                                 const std::map<std::string, Price> &prices) {
  RepairOutcomes out;
  const detail::RunIndex index = detail::index_runs(runs);
  std::set<std::string> seeds, seeds_fixed;
  double cost = 0;
  bool priced = true;
  for (const auto &t : index.trajectories) {
    if (t.turns.empty()) continue;
    const RepairOf *repair = detail::repair_of(*t.turns.front());
    if (!repair) continue;
    bool answered = false;
    for (const TurnRecord *r : t.turns) {
      long long in = 0, out_tokens = 0;
      if (r->response) {
        answered = true;
        in += r->response->usage.prompt_tokens.value_or(0);
        out_tokens += r->response->usage.completion_tokens.value_or(0);
      }
      if (r->synthesized_reasoning && r->synthesized_reasoning->usage) {
        in += r->synthesized_reasoning->usage->prompt_tokens.value_or(0);
        out_tokens += r->synthesized_reasoning->usage->completion_tokens.value_or(0);
      }
      out.prompt_tokens += in;
      out.completion_tokens += out_tokens;
      // Prices are per endpoint name; the model label carries no variant in a repairs run.
      const auto price = prices.find(r->model);
      if (price == prices.end()) {
        if (in + out_tokens > 0) priced = false;
      } else {
        cost += cost_usd(price->second, in, out_tokens);
      }
    }
    if (!answered) {
      ++out.unanswered;
      continue;
    }
    const std::string seed = repair->seed_id.empty() ? t.trajectory_id : repair->seed_id;
    const std::string category = repair->category.empty() ? "?" : repair->category;
    const std::string student = repair->student_model.empty() ? "?" : repair->student_model;
    const int student_turn = repair->student_turn;
    const TurnRecord *kept = detail::kept_repair_turn(t);
    seeds.insert(seed);
    ++out.trajectories;
    for (FixCount *c : {&out.all, &out.by_category[category], &out.by_task[t.task_id],
                        &out.by_student_model[student], &out.by_student_turn[student_turn]}) {
      ++c->trajectories;
      if (kept) ++c->fixed;
    }
    if (!kept) continue;
    seeds_fixed.insert(seed);
    ++out.fixed_at_teacher_turn[kept->turn];
    const std::string source = detail::repair_reasoning_source(*kept);
    if (source == "teacher") ++out.reasoning_from_teacher;
    if (source == "synthesized") ++out.reasoning_synthesized;
    if (source == "none") ++out.reasoning_missing;
  }
  out.seeds = static_cast<int>(seeds.size());
  out.seeds_fixed = static_cast<int>(seeds_fixed.size());
  if (priced && out.trajectories > 0) out.cost_usd = cost;
  return out;
}

namespace {

std::string rate_cell(const FixCount &c) {
  if (c.trajectories == 0) return "-";
  const auto ci = c.interval();
  return fmt::format("{}/{} = {:.0f}% [{:.0f}-{:.0f}%]", c.fixed, c.trajectories,
                     100.0 * c.fixed / c.trajectories, ci ? 100 * ci->lo : 0.0, ci ? 100 * ci->hi : 0.0);
}

template <class Key>
std::string fix_table(const std::string &heading, const std::string &title, const std::string &column,
                      const std::map<Key, FixCount> &rows) {
  std::string md = fmt::format("\n{}# {}\n\n| {} | fixed / trajectories (95% Wilson) |\n|---|---|\n", heading,
                               title, column);
  if (rows.empty()) md += "| (none) | - |\n";
  for (const auto &[key, c] : rows) md += fmt::format("| {} | {} |\n", key, rate_cell(c));
  return md;
}

}  // namespace

std::string render_repairs_markdown(const RepairOutcomes &o, const std::string &heading) {
  std::string md = fmt::format(
      "\n{} Repairs: the teacher's fix rate\n\nA trajectory (student failure × teacher sample) is fixed when "
      "a turn is correct, executed its target instructions and reached the run's target with status ok. "
      "{} trajectories over {} student failures; {} failures fixed by at least one sample.{}\n",
      heading, o.trajectories, o.seeds, o.seeds_fixed,
      o.unanswered ? fmt::format(" {} trajectories never got an answer (request failures) and are left out.",
                                 o.unanswered)
                   : "");
  md += fmt::format("\nOverall: {}\n", rate_cell(o.all));
  md += fix_table(heading, "Fix rate by failure category", "category", o.by_category);
  md += fix_table(heading, "Fix rate by task", "task", o.by_task);
  md += fix_table(heading, "Fix rate by student model", "student model", o.by_student_model);
  md += fix_table(heading, "Fix rate by student turn", "student turn", o.by_student_turn);
  md += fmt::format(
      "\n{}# Kept examples\n\n| | |\n|---|---:|\n| kept examples (fixed trajectories; an export drops "
      "duplicate fixes) | {} |\n",
      heading, o.all.fixed);
  for (const auto &[turn, n] : o.fixed_at_teacher_turn)
    md += fmt::format("| fixed at teacher turn {} | {} |\n", turn, n);
  md += fmt::format(
      "| reasoning from the teacher's server | {} |\n| reasoning synthesized (one more request) | {} "
      "|\n| no reasoning | {} |\n",
      o.reasoning_from_teacher, o.reasoning_synthesized, o.reasoning_missing);
  md += fmt::format("| tokens (prompt + completion, every teacher request) | {} |\n",
                    o.prompt_tokens + o.completion_tokens);
  const auto tokens = o.tokens_per_kept_example();
  md += fmt::format("| tokens per kept example | {} |\n", tokens ? fmt::format("{:.0f}", *tokens) : "-");
  md += fmt::format("| cost (USD) | {} |\n", o.cost_usd ? fmt::format("{:.4f}", *o.cost_usd) : "no price");
  const auto cost = o.cost_per_kept_example();
  md += fmt::format("| cost per kept example (USD) | {} |\n", cost ? fmt::format("{:.4f}", *cost) : "-");
  return md;
}

}  // namespace ptxbench::traces
