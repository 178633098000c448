#include "evaluator/detail/execution_axis.hpp"

#include <cstdio>

#include "evaluator/protocol/error.hpp"
#include "evaluator/target_work.hpp"
#include "evaluator/verdict.hpp"
#include "util/strings.hpp"

namespace ptxbench::evaluator::detail {
namespace {

// "FFMA 1.23e+09, IMAD 4.5e+08, LDS 2e+08": the busiest opcode families, where the work ran instead.
std::string top_opcodes_text(const protocol::ExecutionFigures &figures, std::size_t limit) {
  std::string out;
  for (const auto &op : figures.top_opcodes) {
    if (limit-- == 0) break;
    char count[32];
    std::snprintf(count, sizeof count, "%.3g", static_cast<double>(op.warp_executions));
    out += (out.empty() ? "" : ", ") + op.family + " " + count;
  }
  return out;
}

}  // namespace

TargetsExecutedAxis targets_executed_axis(const StageResult &execution, bool task_has_targets,
                                          double min_work_share, double min_byte_share,
                                          const protocol::RedundantWorkPolicy &redundant_work) {
  TargetsExecutedAxis axis;
  if (execution.status != Status::ok || !task_has_targets) return axis;
  std::optional<protocol::ExecutionFigures> figures;
  try {
    figures = protocol::execution_figures_from_figures(execution.figures);
  } catch (const protocol::ProtocolError &e) {
    // Fails closed: the record keeps the figures as they came, and the warning names the field.
    axis.value = false;
    axis.shortfalls.push_back("the execution figures are malformed (" + std::string(e.what()) +
                              "), so the targets cannot be shown to execute and do the work");
    return axis;
  }
  if (!figures) return axis;
  const protocol::ExecutionFigures &f = *figures;
  bool all = true;
  for (const auto &t : f.targets) {
    all = all && t.executed;
    if (t.executed && t.byte_share && *t.byte_share < min_byte_share) {
      all = false;
      axis.shortfalls.push_back("target " + t.name + ": executed, but it delivered at most " +
                                util::percent_text(*t.byte_share) +
                                " of the bytes the kernel read from global memory (the rest came by plain "
                                "loads); a TMA target counts as executed only when it delivers at least " +
                                util::percent_text(min_byte_share) + " of them");
    }
    // Targets without a FLOP meaning (TMA loads) or whose work is unknown have no work_share.
    if (!t.executed || !t.work_share || *t.work_share >= min_work_share) continue;
    all = false;
    std::string line = "target " + t.name + ": executed, but its instructions did " +
                       util::percent_text(*t.work_share) + " of the task's FLOPs";
    if (const std::string top = top_opcodes_text(f, 3); !top.empty())
      line += " (the rest ran on other units: top opcodes " + top + ")";
    line += "; targets count as executed only when they do at least " + util::percent_text(min_work_share) +
            " of the work";
    axis.shortfalls.push_back(std::move(line));
  }
  // Executed and doing the work by count, yet the same work done again outside the targets.
  if (auto repeated = redundant_work_shortfall(f, min_work_share, redundant_work)) {
    all = false;
    axis.shortfalls.push_back(std::move(*repeated));
  }
  axis.value = all;
  return axis;
}

AxesDecision decide_axes(const Verdict &verdict, bool task_has_targets, double min_work_share,
                         double min_byte_share, const protocol::RedundantWorkPolicy &redundant_work) {
  AxesDecision d;
  if (verdict.correctness.status != Status::skipped)
    d.axes.correct = verdict.correctness.status == Status::ok;
  TargetsExecutedAxis executed = targets_executed_axis(verdict.execution, task_has_targets, min_work_share,
                                                       min_byte_share, redundant_work);
  d.axes.targets_executed = executed.value;
  d.shortfalls = std::move(executed.shortfalls);
  if (verdict.timing.status == Status::ok) {
    try {
      if (const auto timing = verdict.timing_figures()) d.axes.speedup = timing->geomean_speedup;
    } catch (const protocol::ProtocolError &) {
      // figures not of the protocol's form: no speedup measured (the record keeps them as they came)
    }
  }
  return d;
}

namespace {

// "12 of 58720256 output elements wrong (max abs error 0.31)": one hidden workload's failure, in numbers.
std::string hidden_failure_summary(const protocol::HiddenWorkload &row) {
  if (row.kind == protocol::HiddenKind::nondeterministic)
    return "a second identical launch gave different bits (a race)";
  std::string text;
  const protocol::CorrectnessWorkload &c = *row.check;
  if (c.mismatches > 0)
    text = util::number_text(static_cast<double>(c.mismatches)) + " of " +
           util::number_text(static_cast<double>(c.output_elements)) + " output elements wrong";
  if (c.unwritten_count > 0)
    text += (text.empty() ? "" : ", ") + util::number_text(static_cast<double>(c.unwritten_count)) +
            " never written";
  if (c.guard_damage > 0) text += (text.empty() ? "" : ", ") + std::string("wrote outside a tensor");
  if (c.inputs_mutated) text += (text.empty() ? "" : ", ") + std::string("modified an input");
  return text.empty() ? "incorrect" : text;
}

}  // namespace

std::optional<Generalization> decide_generalization(const Verdict &verdict, std::size_t hidden_workloads,
                                                    const std::map<std::string, std::string> &plan_errors,
                                                    bool check) {
  if (hidden_workloads == 0) return std::nullopt;
  Generalization g;
  if (!check) {
    g.reason = "not checked: the evaluator's hidden-workload check is off";
    return g;
  }
  if (verdict.correctness.status != Status::ok) {
    g.reason = verdict.correctness.status == Status::skipped
                   ? "not checked: the GPU stages did not run (" + verdict.correctness.summary + ")"
                   : "not checked: the kernel is not correct on the shown workloads";
    return g;
  }
  for (const auto &[name, why] : plan_errors)
    g.failed.push_back({name, "bad_manifest", "the launch manifest does not resolve there: " + why});
  const StageResult &stage = verdict.generalization;
  std::optional<protocol::GeneralizationFigures> figures;
  std::string malformed;
  try {
    figures = verdict.generalization_figures();
  } catch (const protocol::ProtocolError &e) {
    malformed = e.what();  // counted as nothing checked, saying why
  }
  for (const protocol::HiddenWorkload &row :
       figures ? figures->workloads : std::vector<protocol::HiddenWorkload>{}) {
    if (row.kind == protocol::HiddenKind::ok) {
      ++g.passed;
    } else if (row.check) {  // incorrect or nondeterministic (a skipped shape is not the kernel's failure)
      const bool incorrect = row.kind == protocol::HiddenKind::incorrect;
      const auto elements = static_cast<double>(row.check->output_elements);
      g.failed.push_back({row.name, std::string(protocol::to_string(row.kind)), hidden_failure_summary(row),
                          incorrect && elements > 0
                              ? std::optional<double>(static_cast<double>(row.check->mismatches) / elements)
                              : std::nullopt});
      if (g.first_mismatch.is_null() && row.check->first_mismatch)
        g.first_mismatch = *row.check->first_mismatch;
    }
  }
  // A fault, hang or refused launch ends the stage at the workload in progress; the ones after it stay
  // unchecked (they are not counted).
  const bool ended_by_fault = stage.status == Status::runtime_error || stage.status == Status::timeout ||
                              stage.status == Status::launch_error;
  if (ended_by_fault)
    g.failed.push_back({figures && figures->in_progress ? *figures->in_progress : std::string("?"),
                        std::string(to_string(stage.status)), stage.summary});
  g.total = g.passed + static_cast<int>(g.failed.size());
  if (g.total == 0) {
    g.reason = !malformed.empty()
                   ? "not checked: the generalization figures are malformed (" + malformed + ")"
               : stage.summary.empty() ? "not checked"
                                       : "not checked: " + stage.summary;
    return g;
  }
  g.value = g.failed.empty();
  return g;
}

}  // namespace ptxbench::evaluator::detail
