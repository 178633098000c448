// One turn's outcome, read from its record's verdict (traces/outcome.hpp).
#include "traces/outcome.hpp"

#include <algorithm>
#include <iterator>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/error.hpp"
#include "traces/detail/run_view.hpp"

namespace ptxbench::traces {

using detail::bool_field;
using detail::Json;
using detail::number_field;
using detail::object_field;
using detail::string_field;
using detail::verdict_of;

std::string status_of(const TurnRecord &record) {
  const Json *v = verdict_of(record);
  if (!v) return "request_failed";
  return string_field(*v, "status").value_or("unknown");
}

namespace {
const Json *axes_of(const TurnRecord &record) {
  const Json *v = verdict_of(record);
  return v ? object_field(*v, "axes") : nullptr;
}
}  // namespace

std::optional<bool> correct_of(const TurnRecord &record) {
  const Json *a = axes_of(record);
  return a ? bool_field(*a, "correct") : std::nullopt;
}

std::optional<bool> targets_executed_of(const TurnRecord &record) {
  const Json *a = axes_of(record);
  return a ? bool_field(*a, "targets_executed") : std::nullopt;
}

std::optional<bool> generalizes_of(const TurnRecord &record) {
  const Json *v = verdict_of(record);
  const Json *g = v ? object_field(*v, "generalizes") : nullptr;
  return g ? bool_field(*g, "value") : std::nullopt;
}

std::optional<bool> borderline_of(const TurnRecord &record) {
  const Json *v = verdict_of(record);
  const Json *stages = v ? object_field(*v, "stages") : nullptr;
  const Json *c = stages ? object_field(*stages, "correctness") : nullptr;
  const Json *f = c ? object_field(*c, "figures") : nullptr;
  if (!f) return std::nullopt;
  try {
    const auto figures = protocol::correctness_figures_from_figures(*f);
    return figures ? std::optional<bool>(figures->borderline) : std::nullopt;
  } catch (const protocol::ProtocolError &) {
    return std::nullopt;  // figures this build cannot read: not known
  }
}

std::optional<double> speedup_of(const TurnRecord &record) {
  const Json *a = axes_of(record);
  auto s = a ? number_field(*a, "speedup") : std::nullopt;
  if (s && !(*s > 0)) return std::nullopt;  // a non-positive speedup is not a measurement
  return s;
}

bool compiled_of(const TurnRecord &record) {
  const Json *v = verdict_of(record);
  if (!v) return false;
  if (const Json *stages = object_field(*v, "stages")) {
    if (const Json *compile = object_field(*stages, "compile")) {
      return string_field(*compile, "status").value_or("") == "ok";
    }
  }
  static const char *kBeforeCubin[] = {"no_kernel",     "bad_manifest", "static_error",
                                       "compile_error", "skipped",      "unknown"};
  const std::string status = status_of(record);
  return std::none_of(std::begin(kBeforeCubin), std::end(kBeforeCubin),
                      [&](const char *s) { return status == s; });
}

std::string failure_category_of(const TurnRecord &record) {
  std::string status = status_of(record);
  if (status != "ok") return status;
  if (targets_executed_of(record) == false) return "targets_not_executed";
  return "ok";
}

}  // namespace ptxbench::traces
