// The worker's names for the job it reads and the result it writes: the protocol's types
// (evaluator/protocol/job.hpp, result.hpp), which the evaluator writes and reads with the same code.
// The names (ptxbench::worker::Job, JobWorkload, LaunchPlan, ...) are declared in
// detail/protocol_names.hpp, which the worker's stages share.
#pragma once

#include "evaluator/worker/detail/protocol_names.hpp"
