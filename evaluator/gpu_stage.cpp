// Placeholder until the GPU worker lands: GPU stages are reported skipped.
#include "evaluator/evaluator.hpp"

namespace ptxbench::evaluator {

std::string gpu_unavailable_reason(const EvaluatorSettings &) { return "the GPU worker is not built yet"; }

void run_gpu_stages(CompiledCandidate &candidate, const tasks::Task &, const EvaluatorSettings &settings) {
  const std::string reason = gpu_unavailable_reason(settings);
  for (StageResult *s : {&candidate.verdict.correctness, &candidate.verdict.execution, &candidate.verdict.timing}) {
    s->status = Status::skipped;
    s->summary = reason;
  }
  candidate.verdict.finalize_status();
}

}  // namespace ptxbench::evaluator
