#include "evaluator/protocol/margin.hpp"

#include <algorithm>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using nlohmann::json;

template <class IO>
void fields(IO &io, TensorMargin &t) {
  io("tensor", t.tensor);
  io("max_error_ratio", t.max_error_ratio, Bounds{0});
  io("trial", t.trial, Bounds{0});
}

template <class IO>
void fields(IO &io, WorkloadMargin &m) {
  io("tensors", m.tensors);
  io("max_error_ratio", m.max_error_ratio, Bounds{0});
  io("borderline", m.borderline);
  io("trials_run", m.trials_run, Bounds{0});
  io("trials_failed", m.trials_failed, Bounds{0});
  io("extra_trials", m.extra_trials, Bounds{0});
  io("failure_rate", m.failure_rate, Bounds{0, 1});
  io("extra_stopped_by", m.extra_stopped_by);
}

void note_ratio(WorkloadMargin &m, const std::string &tensor, double ratio, int trial) {
  auto it = std::find_if(m.tensors.begin(), m.tensors.end(),
                         [&](const TensorMargin &t) { return t.tensor == tensor; });
  if (it == m.tensors.end()) it = m.tensors.insert(m.tensors.end(), TensorMargin{tensor, 0, 0});
  if (it->trial == 0 || ratio > it->max_error_ratio) {
    it->max_error_ratio = ratio;
    it->trial = trial;
  }
  m.max_error_ratio = std::max(m.max_error_ratio, ratio);
}

bool is_borderline(const WorkloadMargin &m, bool other_failure, const BorderlinePolicy &p) {
  return !other_failure && !m.tensors.empty() && m.max_error_ratio >= p.low && m.max_error_ratio <= p.high;
}

std::string extra_trial_stop(const WorkloadMargin &m, double spent_seconds, double trial_seconds,
                             const BorderlinePolicy &p) {
  if (m.extra_trials >= p.extra_trials) return "count";
  const double budget = static_cast<double>(p.budget.count()) / 1000.0;
  if (spent_seconds + trial_seconds > budget) return "budget";
  return "";
}

void count_trials(WorkloadMargin &m, int trials_run, int trials_passed) {
  m.trials_run = trials_run;
  m.trials_failed = trials_run - trials_passed;
  m.failure_rate = trials_run > 0 ? static_cast<double>(m.trials_failed) / trials_run : 0.0;
}

void to_json(json &j, const TensorMargin &t) {
  j = codec::write_fields(const_cast<TensorMargin &>(t));
}
void from_json(const json &j, TensorMargin &t) {
  t = TensorMargin{};
  codec::read_fields(j, t);
}
void to_json(json &j, const WorkloadMargin &m) {
  j = codec::write_fields(const_cast<WorkloadMargin &>(m));
}
void from_json(const json &j, WorkloadMargin &m) {
  m = WorkloadMargin{};
  codec::read_fields(j, m);
  static const char *const kStops[] = {"", "count", "budget", "left_band"};
  if (std::find(std::begin(kStops), std::end(kStops), m.extra_stopped_by) == std::end(kStops))
    throw ProtocolError("extra_stopped_by", "unknown value \"" + m.extra_stopped_by + "\"");
  if (m.trials_failed > m.trials_run || m.extra_trials > m.trials_run)
    throw ProtocolError("trials_run", "fewer than the failed or extra trials");
}

}  // namespace ptxbench::protocol
