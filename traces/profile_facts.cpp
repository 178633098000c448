#include "traces/profile_facts.hpp"

#include <cmath>
#include <exception>

#include "evaluator/protocol/profile.hpp"
#include "traces/detail/run_view.hpp"

namespace ptxbench::traces {

AttemptProfile attempt_profile_of(const TurnRecord &record) {
  using detail::object_field;
  AttemptProfile p;
  const detail::Json *v = detail::verdict_of(record);
  const detail::Json *stages = v ? object_field(*v, "stages") : nullptr;
  const detail::Json *stage = stages ? object_field(*stages, "profile") : nullptr;
  const detail::Json *figures = stage ? object_field(*stage, "figures") : nullptr;
  if (!figures) return p;
  std::optional<protocol::KernelProfile> profile;
  try {
    profile = protocol::kernel_profile_from_figures(*figures);
  } catch (const std::exception &e) {  // ProtocolError naming the field: a record is data from disk
    p.error = e.what();
    return p;
  }
  if (!profile) return p;
  p.profiled = true;
  if (const protocol::ProfileMetric *bound = profile->bound_unit()) {
    p.bound_unit = bound->name;
    p.bound_label = bound->label;
    p.bound_value = bound->value;
  }
  if (const protocol::ProfileMetric *tensor = profile->find(kTensorPipeMetric)) {
    if (std::isfinite(tensor->value)) p.tensor_pct = tensor->value;
    if (tensor->library && std::isfinite(*tensor->library)) p.library_tensor_pct = tensor->library;
  }
  return p;
}

}  // namespace ptxbench::traces
