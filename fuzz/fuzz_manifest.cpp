// libFuzzer target: the launch manifest (JSON schema, expressions over the task's symbols, per-workload
// resolution with tensor-map checks) and the integer expression evaluator on its own.
#include "evaluator/candidate.hpp"
#include "fuzz_common.hpp"
#include "util/int_expr.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  namespace ev = ptxbench::evaluator;
  static const ptxbench::tasks::Task task = ptxbench::fuzz::gemm_task();
  const std::string_view text = ptxbench::fuzz::as_text(data, size);

  // The whole input as one expression.
  (void)ptxbench::util::evaluate_int_expression(text, task.workloads[0].symbols);

  const auto manifest = ev::parse_manifest(text, task);
  if (!manifest) {
    if (manifest.error().empty()) __builtin_trap();
    return 0;
  }
  for (const auto &w : task.workloads) {
    const auto plan = ev::resolve_launch(*manifest, task, w);
    if (!plan) {
      if (plan.error().empty()) __builtin_trap();
      continue;
    }
    for (std::int64_t d : plan->grid)
      if (d < 1) __builtin_trap();  // a resolved plan never has an empty grid
    if (plan->shared_bytes < 0) __builtin_trap();
    (void)nlohmann::json(*plan).dump();  // the job's form of the plan (evaluator/protocol/job.hpp)
  }
  return 0;
}
