// The worker's names for the protocol's types (evaluator/protocol/job.hpp, result.hpp): the job it reads,
// its workloads and element types. The evaluator writes and reads them with the same code. The public
// headers job.hpp and family.hpp include this one, and so do the stages' headers in detail/.
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

/// Element types and input distributions, by the names the job uses (evaluator/protocol/job.hpp).
using protocol::ElemType;
using protocol::InputDistribution;
using protocol::size_of;
using protocol::to_string;

/// One workload, concrete (resolved by the evaluator): its tensors, scalars and figures.
using protocol::ScalarSpec;
using protocol::TensorSpec;
using protocol::WorkloadSpec;

}  // namespace ptxbench::worker
