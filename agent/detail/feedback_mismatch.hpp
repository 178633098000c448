// "Pattern of the mismatches": an incorrect kernel's wrong elements per output tensor, the worst of them and
// where they sit (leading indices, row and column ranges, position in 64- and 128-wide tiles, one block or
// spread), rendered from the worker's typed record (protocol::MismatchPattern). Bounded to kMaxPatternLines.
#pragma once

#include <cstddef>
#include <string>

#include "evaluator/protocol/mismatch.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"

namespace ptxbench::agent::detail {

inline constexpr std::size_t kMaxPatternLines = 12;

/// The section for the first failing shown workload that carries a record; "" when none does (verdicts
/// from before the record, or a failure without mismatches such as guard damage alone).
std::string mismatch_pattern_section(const tasks::Task &task, const evaluator::Verdict &v);

/// For a kernel correct on the shown shapes but wrong on a hidden one: the coarse pattern of the first
/// incorrect hidden shape, headed by how the generalization section names it ("unseen shape 2", or its
/// values with hidden_workloads.reveal); "" when there is none.
std::string hidden_mismatch_pattern_section(const tasks::Task &task, const evaluator::Verdict &v);

/// One record as text (at most kMaxPatternLines lines, each ending in '\n'). `workload` names the shape
/// in the heading ("" for none: a hidden shape). Dimensions are named by the task's shape symbols when
/// `task` has the tensor, else by the record's names. A coarse record gives no indices or sizes.
std::string render_mismatch_pattern(const protocol::MismatchPattern &p, const tasks::Task *task,
                                    const std::string &workload);

}  // namespace ptxbench::agent::detail
