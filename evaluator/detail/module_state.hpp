// Which module-scope variables a kernel can write. NVRTC puts namespace-scope constexpr/const tables and
// printf format strings in `.global` variables that are only ever read; a `__device__` counter or scratch
// array is written. The static stage warns only about the written ones (state kept between launches).
#pragma once

#include <vector>

namespace ptxbench::evaluator {
struct PtxModule;
struct PtxToken;
}  // namespace ptxbench::evaluator

namespace ptxbench::evaluator::detail {

/// Sets PtxVariable::may_be_written for every module variable of `module`, parsed from `tokens`.
///
/// How: per function, the registers that may hold a variable's address are followed from the instructions
/// that name it (`mov %rd1, tbl`) through every instruction that computes a register from them (cvta,
/// add, mov, ...; a load's result is data, not the address). The variable may be written when
///  - an instruction that writes memory (st, atom, red, cp and its bulk/async forms, multimem, tensormap,
///    mbarrier, sust/sured, discard, stmatrix) has it, or a register holding its address, in its
///    destination (the first bracketed operand; cp.*.prefetch only reads);
///  - its address is stored as a value (to memory, or as a call argument to a function other than vprintf
///    and __assertfail, whose pointer arguments they only read; or returned from a .func);
///  - another variable's initializer names it (a table of addresses).
/// Conservative: what it cannot follow counts as written; a false "written" costs a warning, never a verdict.
void mark_written_variables(PtxModule &module, const std::vector<PtxToken> &tokens);

}  // namespace ptxbench::evaluator::detail
