#include "traces/profile_facts.hpp"

#include <cmath>
#include <exception>

#include "evaluator/protocol/profile.hpp"

namespace ptxbench::traces {

AttemptProfile attempt_profile_of(const TurnRecord &record) {
  AttemptProfile p;
  const auto v = record.decoded_verdict();
  if (!v) return p;
  std::optional<protocol::KernelProfile> profile;
  try {
    profile = v->kernel_profile();
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
