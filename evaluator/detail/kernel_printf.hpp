// The candidate's device printf as the verdict reports it: whether the kernel calls printf at all (from
// its PTX), and a note on a stage that ran past a limit, since device printf is slow and a kernel that
// prints from many threads or in a loop can run for far longer than its work takes.
#pragma once

#include <string_view>

#include "evaluator/protocol/worker_output.hpp"

#include "evaluator/protocol/verdict.hpp"

namespace ptxbench::evaluator {
using protocol::Verdict;
}  // namespace ptxbench::evaluator

namespace ptxbench::evaluator::detail {

/// The PTX calls vprintf (what printf in CUDA compiles to): an identifier token outside comments and
/// strings. false for PTX that does not lex.
bool ptx_calls_printf(std::string_view ptx);

/// Appends to the summary (and to the first diagnostic, when it repeats the summary) of every GPU stage
/// that timed out what the kernel printed before the limit, when it printed or calls printf: "the kernel
/// printed N bytes with printf before the limit ..." or "the kernel calls printf ...".
void note_printf_in_timeouts(Verdict &v, const protocol::KernelOutput &output, bool calls_printf);

}  // namespace ptxbench::evaluator::detail
