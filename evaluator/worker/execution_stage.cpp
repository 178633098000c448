// The execution stage: CUPTI SASS counts of one instrumented launch, joined with the listing.
#include "evaluator/worker/detail/execution_stage.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "evaluator/worker/detail/execution_figures.hpp"
#include "evaluator/worker/detail/sass_counts.hpp"
#include "util/strings.hpp"

namespace ptxbench::worker::detail {

std::string ExecutionStage::await_sass_listing() {
  if (!ctx_.job().sass.empty() || ctx_.job().sass_path.empty()) return "";
  const auto give_up = Clock::now() + std::chrono::seconds(120);
  std::error_code ec;
  while (!std::filesystem::exists(ctx_.job().sass_path, ec)) {
    if (Clock::now() > give_up) return "the SASS listing did not arrive within 120 s";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::ifstream in(ctx_.job().sass_path);
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "the SASS listing file is not JSON";
  SassHandover handover;
  try {
    handover = j.get<SassHandover>();
  } catch (const protocol::ProtocolError &e) {
    return std::string("the SASS listing file is malformed: ") + e.what();
  }
  if (handover.error) return *handover.error;
  ctx_.job().sass = std::move(handover.sass);
  return "";
}

namespace {

/// The largest TMA box of the launch: an upper bound on what one UTMALDG moves (which map a PC uses
/// is not in the SASS), so a token TMA load is judged generously and still cannot pass.
double largest_box_bytes(const JobWorkload &w) {
  double box_bytes = 0;
  for (const auto &p : w.launch.params) {
    if (p.kind != ParamKind::tensor_map) continue;
    double elems = 1;
    for (auto b : p.box) elems *= static_cast<double>(b);
    for (const auto &t : w.spec.tensors)
      if (t.name == p.name) box_bytes = std::max(box_bytes, elems * static_cast<double>(size_of(t.type)));
  }
  return box_bytes;
}

/// One line per target for the model: absent, never executed, or executed with its work and byte shares.
std::string target_line(const protocol::TargetExecution &t, const JobWorkload &w,
                        const std::string &top_text) {
  std::string line;
  if (!t.present_in_sass)
    line = "target " + t.name + " is not in the compiled SASS (no " + json(t.sass_families).dump() +
           " instructions)";
  else if (!t.executed)
    line = "target " + t.name +
           " is in the SASS but never executed (0 warp executions: it sits on a path the "
           "kernel never takes)";
  else
    line = "target " + t.name + " executed: " + std::to_string(t.warp_executions.value_or(0)) +
           " warp instructions";
  if (t.executed && t.work_share) {
    // The evaluator decides whether this share is enough (settings.min_target_work_share).
    const double share = *t.work_share;
    line += " doing " + util::percent_text(share) + " of workload " + w.spec.name + "'s " +
            fmt_num(w.spec.flops) + " FLOPs";
    if (share < 0.99) line += " (the rest ran on other units; top opcodes: " + top_text + ")";
  }
  if (t.executed && t.byte_share)
    line += " loading " + util::percent_text(*t.byte_share) +
            " of the bytes read from global memory (at most, counting every box at the largest size)";
  return line;
}

}  // namespace

void ExecutionStage::run(bool correct) {
  const auto start = Clock::now();
  if (auto skipped = execution_skipped(correct, start)) {
    ctx_.set_stage("execution", std::move(*skipped));
    return;
  }
  const double launch_ms = std::max(ctx_.slowest_launch_ms(), ctx_.correctness_launch_ms());
  // The smallest workload: instrumented code runs much slower.
  std::size_t pick = 0;
  for (std::size_t i = 1; i < ctx_.job().workloads.size(); ++i)
    if (ctx_.job().workloads[i].spec.flops < ctx_.job().workloads[pick].spec.flops) pick = i;
  const JobWorkload &w = ctx_.job().workloads[pick];
  ctx_.prepare("execution", w);
  BufferPool pool(256, ctx_.stream());
  TensorSet tensors = ctx_.workload_tensors(pick, pool, 0xE3ull);
  ctx_.poison_outputs(w.spec, tensors);
  ctx_.add_workspace(w, pool, tensors);  // zero-filled as allocated, before the instrumented launch
  detail::PackedParams params;
  ctx_.pack("execution", w, tensors, params);
  PTXB_CUDA(cudaStreamSynchronize(ctx_.stream()));
  const detail::SassCountResult counts =
      detail::count_sass_instructions(ctx_.device().ctx, ctx_.device().facts.ordinal, [&] {
        // Instrumented code runs many times slower: allow 200x the slowest timed launch, within limits.
        const double deadline = std::clamp(200.0 * launch_ms, ctx_.kernel_hang_ms(), 60'000.0);
        ctx_.launch_and_wait("execution", w, params, "instrumented launch", deadline, /*instrumented=*/true);
      });
  if (!counts.available) {
    ctx_.set_stage(
        "execution",
        stage_json(Status::skipped, "CUPTI cannot count instructions here: " + counts.reason,
                   json::array({diag(counts.reason, "warning")}), json::object(), seconds_since(start)));
    return;
  }
  protocol::ExecutionFigures figures = detail::execution_figures(
      ctx_.job().sass, ctx_.job().targets, counts.counts, w.spec.flops, largest_box_bytes(w));
  figures.workload = w.spec.name;
  figures.instrumented = true;
  figures.dropped_records = counts.dropped_records;
  // The busiest opcode families, named when a target did only part of the work.
  std::string top_text;
  for (std::size_t i = 0; i < figures.top_opcodes.size() && i < 3; ++i)
    top_text += (i ? ", " : "") + figures.top_opcodes[i].family + " " +
                fmt_num(static_cast<double>(figures.top_opcodes[i].warp_executions));
  json diagnostics = json::array();
  std::string summary;
  for (const auto &t : figures.targets) {
    const std::string line = target_line(t, w, top_text);
    diagnostics.push_back(diag(line, t.executed ? "note" : "warning"));
    summary += (summary.empty() ? "" : "; ") + line;
  }
  if (summary.empty()) summary = "the task names no target instructions";
  ctx_.set_stage("execution",
                 stage_json(Status::ok, summary, diagnostics, json(figures), seconds_since(start)));
}

std::optional<protocol::StageResult> ExecutionStage::execution_skipped(bool correct,
                                                                       Clock::time_point start) {
  if (const std::string why = await_sass_listing(); !why.empty())
    return stage_json(Status::skipped, "no SASS listing of the cubin to join the counts with: " + why);
  if (ctx_.job().sass.empty())
    return stage_json(Status::skipped,
                      "no SASS listing of the cubin to join the counts with (cuobjdump/nvdisasm "
                      "missing on this machine)");
  // Instrumented code runs up to ~200x slower than plain. Counts that decide the axis are always taken;
  // counts that only feed the repair prompt (an incorrect kernel, or a target already missing from the
  // SASS) only when that is cheap, so a slow kernel does not hold the GPU for them.
  const double launch_ms = std::max(ctx_.slowest_launch_ms(), ctx_.correctness_launch_ms());
  const double estimated_ms = 200.0 * launch_ms;
  const detail::FeedbackBudgets budgets{
      incorrect_execution_budget_ms(),
      static_cast<double>(ctx_.job().limits.partial_targets_execution_budget.count())};
  const detail::InstrumentationPlan plan =
      detail::plan_instrumentation(ctx_.job().sass, ctx_.job().targets, correct, estimated_ms, budgets);
  const std::string absent = util::join(plan.absent_targets, ", ");
  switch (plan.decision) {
    case detail::Instrumentation::count:
      return std::nullopt;
    case detail::Instrumentation::no_target_in_sass: {
      const std::string why = "none of the task's target instructions is in the compiled SASS (" + absent +
                              "), so none can execute; the kernel was not instrumented";
      json diagnostics = json::array();
      for (const auto &name : plan.absent_targets)
        diagnostics.push_back(diag("target " + name + " is not in the compiled SASS", "warning"));
      return stage_json(Status::ok, why, diagnostics,
                        json(detail::uncounted_figures(ctx_.job().sass, ctx_.job().targets, why)),
                        seconds_since(start));
    }
    case detail::Instrumentation::over_feedback_budget:
      break;
  }
  const std::string cost = "counting instructions would take about " + fmt_num(estimated_ms / 1000.0) +
                           " s (200x its " + fmt_num(launch_ms) + " ms launch; budget " +
                           fmt_num((correct ? budgets.partial_targets_ms : budgets.incorrect_ms) / 1000.0) +
                           " s)";
  if (!plan.absent_targets.empty()) {
    const std::string why = "target " + absent +
                            " is not in the compiled SASS, so the targets did not all execute; the others "
                            "were not counted: " +
                            cost;
    return stage_json(Status::ok, why, json::array({diag(why, "warning")}),
                      json(detail::uncounted_figures(ctx_.job().sass, ctx_.job().targets, why)),
                      seconds_since(start));
  }
  return stage_json(
      Status::skipped, "not counted: the outputs were not correct and " + cost, json::array(),
      json(protocol::ExecutionFigures{.instrumented = false, .estimated_seconds = estimated_ms / 1000.0}),
      seconds_since(start));
}

double ExecutionStage::incorrect_execution_budget_ms() const {
  return static_cast<double>(ctx_.job().limits.incorrect_execution_budget.count());
}

}  // namespace ptxbench::worker::detail
