// The redundant-work rule of the targets-executed axis, in one place for the evaluator's decision and the
// feedback that explains it: beside an executed tensor-core target, the multiply-add work outside the
// targets (protocol::MatrixWork, the execution figures' `matrix_work`) must stay within
// RedundantWorkPolicy::max_non_target_share of the task's FLOPs. A wgmma whose results are thrown away
// (multiplied by 0) beside the same matmuls on mma.sync executes every instruction and does 100% of the
// FLOPs by count; the 100% done again outside it is what gives it away.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "evaluator/protocol/execution.hpp"
#include "evaluator/protocol/matrix_work.hpp"

namespace ptxbench::evaluator {

/// A SASS family in words a kernel author knows: "HMMA" -> "mma.sync (HMMA)", "FFMA" -> "fp32 fma (FFMA)";
/// the family itself when it has no other name.
std::string family_words(const std::string &family);

/// "mma.sync (HMMA) 100%, fp32 fma (FFMA) 0.4%": the families `policy` counts, most FLOPs first, at most
/// `limit`, each with its share of the workload's FLOPs; families under 0.05% are left out.
std::string non_target_work_text(const protocol::MatrixWork &w, const protocol::RedundantWorkPolicy &policy,
                                 std::size_t limit = 3);

/// The rule on an execution stage's figures: the sentence saying why the targets' work counts as repeated,
/// or nullopt when the rule holds or does not apply: no tensor-core target (`matrix_target` rows) executed,
/// one of them did less than `min_work_share` of the FLOPs (the work-share rule's shortfall, not this
/// one's), no `matrix_work` record (not counted, or an older verdict), or the workload's FLOPs unknown.
/// (Malformed figures do not decode: the axis that reads them says so.)
std::optional<std::string> redundant_work_shortfall(const protocol::ExecutionFigures &execution_figures,
                                                    double min_work_share,
                                                    const protocol::RedundantWorkPolicy &policy);

}  // namespace ptxbench::evaluator
