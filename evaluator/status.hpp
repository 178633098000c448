// The evaluator's outcomes are the protocol's closed status enum (evaluator/protocol/status.hpp).
#pragma once

#include "evaluator/protocol/status.hpp"

namespace ptxbench::evaluator {

using protocol::kAllStatuses;
using protocol::Status;
using protocol::status_from_string;
using protocol::to_string;

}  // namespace ptxbench::evaluator
