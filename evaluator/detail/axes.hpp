// The verdict's three axes (protocol::Axes), named in the evaluator for the code deciding them
// (detail/execution_axis.hpp), which does not need the whole verdict.
#pragma once

#include "evaluator/protocol/verdict.hpp"

namespace ptxbench::evaluator {

using protocol::Axes;

}  // namespace ptxbench::evaluator
