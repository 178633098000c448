// Machine fault versus kernel fault, as a typed value (protocol::MachineFault, beside the verdict that
// carries it), and the worker client's rule for a signal sent from outside.
#pragma once

#include "evaluator/protocol/verdict.hpp"

namespace ptxbench::evaluator {

using protocol::machine_fault_from_string;
using protocol::MachineFault;

/// Whether a worker ended by `signal` was killed from outside (not a crash of its own, such as SIGSEGV).
bool killed_from_outside(int signal);

}  // namespace ptxbench::evaluator
