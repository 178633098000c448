// Export examples: the training examples one trajectory yields for an export format (per turn, per
// trajectory, repair or improve pairs, a teacher's verified repair), before filters, caps and rendering.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "traces/detail/run_view.hpp"

namespace ptxbench::traces {
struct ExportCounts;
struct ExportOptions;
struct RepairOf;
}  // namespace ptxbench::traces

namespace ptxbench::traces::detail {

struct Message {
  std::string role;       ///< system | user | assistant
  std::string content;    ///< final text (reasoning already inlined in inline mode)
  std::string reasoning;  ///< field mode only
};

struct Example {
  const TrajectoryView *trajectory = nullptr;
  const TurnRecord *target = nullptr;
  const TurnRecord *source = nullptr;  ///< the turn before (pairs, per-turn), or turn 0 (trajectory)
  int target_turn = 0;
  std::optional<int> source_turn;
  std::string source_category;
  std::vector<Message> messages;
  std::vector<int> loss_messages;  ///< indices into messages that carry the loss
  std::string loss_on;             ///< "last_message" | "all_assistant"
  std::string dedup_key;
  long long token_count = 0;
  bool token_count_exact = true;
  std::size_t chars = 0;
  const RepairOf *repair = nullptr;  ///< a repairs run's example: the target's repair_of
  std::string reasoning_source;      ///< repairs: teacher | synthesized | none
};

/// Appends the examples `t` yields under `options` to `out`, counting candidates and unusable ones.
void build_examples(const TrajectoryView &t, const ExportOptions &options, ExportCounts &counts,
                    std::vector<Example> &out);

}  // namespace ptxbench::traces::detail
