// One turn's outcome, read from its record's verdict in one place: its status, whether it compiled, was
// correct, executed its targets, its speedup, whether it generalizes to the hidden workloads, whether it was
// borderline, and its failure category. The report, exports, repairs and the run's summary table
// (agent/run_summary.cpp) and repair selection (agent/repair_selection.cpp) all count with these.
#pragma once

#include <optional>
#include <string>

#include "traces/record.hpp"

namespace ptxbench::traces {

/// Every outcome fact of one turn, taken from its verdict decoded once (TurnRecord::decoded_verdict).
struct TurnOutcome {
  /// the verdict's status; "request_failed" without a verdict, "unknown" for one that cannot be read
  std::string status = "request_failed";
  bool compiled = false;  ///< ptxas produced a cubin
  std::optional<bool> correct, targets_executed;
  std::optional<double> speedup;  ///< positive, or nullopt (not measured)
  std::optional<bool> generalizes, borderline;
  std::string failure_category = "request_failed";
};

/// One decode, every fact; the functions below are its fields one at a time.
TurnOutcome outcome_of(const TurnRecord &record);

/// Verdict status string; "request_failed" when there is no verdict.
std::string status_of(const TurnRecord &record);
std::optional<bool> correct_of(const TurnRecord &record);
std::optional<bool> targets_executed_of(const TurnRecord &record);
std::optional<double> speedup_of(const TurnRecord &record);
/// verdict.generalizes.value: whether the kernel was also right on the task's hidden workloads; nullopt
/// when the task has none or they were not checked (e.g. wrong on the shown ones, or no GPU).
std::optional<bool> generalizes_of(const TurnRecord &record);
/// The correctness stage flagged a workload borderline (its largest error near the tolerance:
/// figures.borderline); nullopt for verdicts without the figure (no GPU stage, or made before it existed).
std::optional<bool> borderline_of(const TurnRecord &record);
/// ptxas produced a cubin: the compile stage is ok (or, without stages, the status is past compile).
bool compiled_of(const TurnRecord &record);
/// Failure category: the verdict status when not ok; "targets_not_executed" when ok but
/// the target instructions were measured and did not run; "request_failed"; else "ok".
std::string failure_category_of(const TurnRecord &record);

}  // namespace ptxbench::traces
