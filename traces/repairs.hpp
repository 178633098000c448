// Outcomes of repairs runs (`ptxbench repairs`): a teacher's trajectories
// that start from failed student turns (records with "repair_of"). A
// trajectory is a fix when one of its turns reached the run's target (correct,
// targets executed, optional minimum speedup) with status ok; that turn is the
// kept example. Rates are per trajectory (seed × sample), with Wilson
// intervals; tokens and cost count every teacher request, explanations too.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "traces/record.hpp"
#include "traces/stats.hpp"
#include "traces/trajectory_view.hpp"

namespace ptxbench::traces {

/// Trajectories and fixes of one group (a failure category, a task, a student model or a student turn).
struct FixCount {
  int trajectories = 0;  ///< answered at least once (trajectories that never got an answer are left out)
  int fixed = 0;
  std::optional<Interval> interval() const { return wilson_interval(fixed, trajectories); }
};

struct RepairOutcomes {
  int trajectories = 0;            ///< teacher trajectories with an answer
  int unanswered = 0;              ///< trajectories whose every request failed (not the teacher's outcome)
  int seeds = 0, seeds_fixed = 0;  ///< distinct student turns, and those fixed by at least one sample
  FixCount all;
  std::map<std::string, FixCount> by_category, by_task, by_student_model;
  std::map<int, FixCount> by_student_turn;
  std::map<int, int> fixed_at_teacher_turn;            ///< teacher turn of the kept example -> fixes
  int reasoning_from_teacher = 0;                      ///< kept examples whose reasoning the server returned
  int reasoning_synthesized = 0;                       ///< ... explained by one more request
  int reasoning_missing = 0;                           ///< ... with neither
  long long prompt_tokens = 0, completion_tokens = 0;  ///< every teacher request, explanations included
  std::optional<double> cost_usd;                      ///< absent when a teacher has no price
  std::optional<double> tokens_per_kept_example() const;
  std::optional<double> cost_per_kept_example() const;
};

/// True when the runs hold repairs records.
bool has_repairs(const std::vector<LoadedRun> &runs);
/// Outcomes over the repairs records of `runs` (other records are ignored); `prices` by endpoint name.
RepairOutcomes summarize_repairs(const std::vector<LoadedRun> &runs,
                                 const std::map<std::string, Price> &prices);
/// Markdown tables: fix rate per category, task, student model and student turn (95% Wilson intervals),
/// reasoning sources, tokens and cost per kept example. `heading` is the section's Markdown heading level.
std::string render_repairs_markdown(const RepairOutcomes &outcomes, const std::string &heading = "##");

}  // namespace ptxbench::traces
