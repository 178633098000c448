// One turn's outcome, read from its record's typed verdict (traces/outcome.hpp).
#include "traces/outcome.hpp"

#include <algorithm>
#include <array>

#include "evaluator/protocol/error.hpp"

namespace ptxbench::traces {
namespace {

using protocol::Status;

// Statuses that end the pipeline before ptxas made a cubin.
constexpr std::array kBeforeCubin{Status::no_kernel, Status::bad_manifest, Status::static_error,
                                  Status::compile_error, Status::skipped};

bool compiled(const protocol::Verdict &v) {
  if (v.compile.status == Status::ok) return true;
  // A compile stage that says something (failed, or skipped after an earlier failure) decides; a verdict
  // that never wrote one is judged by how far its status got.
  if (v.compile.status != Status::skipped || !v.compile.summary.empty()) return false;
  return std::find(kBeforeCubin.begin(), kBeforeCubin.end(), v.status) == kBeforeCubin.end();
}

std::optional<bool> borderline(const protocol::Verdict &v) {
  try {
    const auto figures = v.correctness_figures();
    return figures ? std::optional<bool>(figures->borderline) : std::nullopt;
  } catch (const protocol::ProtocolError &) {
    return std::nullopt;  // figures this build cannot read: not known
  }
}

}  // namespace

TurnOutcome outcome_of(const TurnRecord &record) {
  TurnOutcome o;
  if (!record.verdict_object()) return o;
  const auto v = record.decoded_verdict();
  if (!v) {
    o.status = o.failure_category = "unknown";
    return o;
  }
  o.status = std::string(protocol::to_string(v->status));
  o.compiled = compiled(*v);
  o.correct = v->axes.correct;
  o.targets_executed = v->axes.targets_executed;
  if (v->axes.speedup && *v->axes.speedup > 0) o.speedup = v->axes.speedup;  // else not a measurement
  if (v->generalizes) o.generalizes = v->generalizes->value;
  o.borderline = borderline(*v);
  o.failure_category = o.status != "ok"              ? o.status
                       : o.targets_executed == false ? "targets_not_executed"
                                                     : "ok";
  return o;
}

std::string status_of(const TurnRecord &record) {
  return outcome_of(record).status;
}
std::optional<bool> correct_of(const TurnRecord &record) {
  return outcome_of(record).correct;
}
std::optional<bool> targets_executed_of(const TurnRecord &record) {
  return outcome_of(record).targets_executed;
}
std::optional<double> speedup_of(const TurnRecord &record) {
  return outcome_of(record).speedup;
}
std::optional<bool> generalizes_of(const TurnRecord &record) {
  return outcome_of(record).generalizes;
}
std::optional<bool> borderline_of(const TurnRecord &record) {
  return outcome_of(record).borderline;
}
bool compiled_of(const TurnRecord &record) {
  return outcome_of(record).compiled;
}
std::string failure_category_of(const TurnRecord &record) {
  return outcome_of(record).failure_category;
}

}  // namespace ptxbench::traces
