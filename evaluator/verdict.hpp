// The evaluator's result type is the protocol's verdict (evaluator/protocol/verdict.hpp): one type and one
// codec for the evaluator, the runner, traces, the service and bench.
#pragma once

#include "evaluator/detail/axes.hpp"
#include "evaluator/machine_fault.hpp"
#include "evaluator/protocol/verdict.hpp"
#include "evaluator/status.hpp"

namespace ptxbench::evaluator {

/// A stage's outcome: the same type (and JSON) the worker writes back (evaluator/protocol/result.hpp).
using protocol::Diagnostic;
using protocol::StageResult;
using protocol::Generalization;
using protocol::Verdict;

}  // namespace ptxbench::evaluator
