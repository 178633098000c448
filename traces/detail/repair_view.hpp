// Read-side facts about repairs records (records with "repair_of"), shared by
// the export's repair pairs, the dataset card and the report.
#pragma once

#include <string>

#include "traces/detail/run_view.hpp"

namespace ptxbench::traces {
struct RepairOf;
}  // namespace ptxbench::traces

namespace ptxbench::traces::detail {

/// The record's repair_of, or nullptr in an ordinary run.
const RepairOf *repair_of(const TurnRecord &record);
/// The turn a repairs trajectory keeps: the first that reached the target with status ok, correct and
/// targets executed; nullptr when none did (or the trajectory is not a repairs one). With
/// `require_target` false (export --all), the first with status ok that is correct.
const TurnRecord *kept_repair_turn(const TrajectoryView &t, bool require_target = true);
/// "teacher" (the server returned reasoning), "synthesized" (explained by one more request) or "none".
std::string repair_reasoning_source(const TurnRecord &record);

}  // namespace ptxbench::traces::detail
