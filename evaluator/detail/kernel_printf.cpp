#include "evaluator/detail/kernel_printf.hpp"

#include <string>

#include "evaluator/ptx.hpp"
#include "evaluator/verdict.hpp"

namespace ptxbench::evaluator::detail {

bool ptx_calls_printf(std::string_view ptx) {
  const auto tokens = lex_ptx(ptx);
  if (!tokens) return false;
  for (const PtxToken &t : *tokens)
    if (t.kind == PtxTokenKind::identifier && t.text == "vprintf") return true;
  return false;
}

void note_printf_in_timeouts(Verdict &v, const protocol::KernelOutput &output, bool calls_printf) {
  if (output.bytes == 0 && !calls_printf) return;
  const std::string note =
      (output.bytes > 0
           ? "the kernel printed " + std::to_string(output.bytes) + " bytes with printf before the limit"
           : std::string("the kernel calls printf")) +
      " (device printf is slow: printing from many threads or in a loop can hold a kernel past the limit, "
      "and what the launch that ran past it printed is lost)";
  for (const protocol::Stage stage : protocol::kWorkerStages) {
    if (stage == protocol::Stage::profile) continue;
    StageResult *s = &v.stage(stage);
    if (s->status != Status::timeout) continue;
    if (!s->diagnostics.empty() && s->diagnostics.front().text == s->summary)
      s->diagnostics.front().text += "; " + note;
    s->summary += "; " + note;
  }
}

}  // namespace ptxbench::evaluator::detail
