// The worker's names for the job it reads and the result it writes: the protocol's types
// (evaluator/protocol/job.hpp, result.hpp), which the evaluator writes and reads with the same code.
#pragma once

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/job.hpp"
#include "evaluator/protocol/result.hpp"

namespace ptxbench::worker {

using protocol::Job;
using protocol::JobMode;
using protocol::JobWorkload;
using protocol::LaunchPlan;
using protocol::ParamKind;
using protocol::ResolvedParam;
using protocol::SassHandover;
using protocol::SassInstruction;
using protocol::TargetSpec;
using protocol::TimingPolicy;

}  // namespace ptxbench::worker
