// How near a workload's outputs come to their tolerance, and how often a kernel near it fails. Written by the
// worker's correctness and generalization stages per workload (figures.workloads[i].margin); read by the
// feedback, `ptxbench show` and the report (through the correctness figures' `borderline`).
//
// margin: {tensors: [{tensor, max_error_ratio, trial}], max_error_ratio, borderline, trials_run,
//          trials_failed, extra_trials, failure_rate, extra_stopped_by}
//
// The rule (BorderlinePolicy, evaluator/protocol/policies.hpp): borderline when max_error_ratio lies in
// [low, high] and nothing but values near the tolerance failed; then up to extra_trials more trials within
// the budget. Any failing trial still makes the workload incorrect.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"
#include "evaluator/protocol/policies.hpp"

namespace ptxbench::protocol {

/// One output tensor's largest error over its tolerance.
struct TensorMargin {
  std::string tensor;
  /// max over every element of every trial run of |got − expected| / (atol + rtol·|expected|), in the
  /// compare's fp32; <= 1 within tolerance. Elements whose error is NaN (a NaN written, a non-finite
  /// reference) are left out: they fail on their own and are counted apart. An infinite error, or any error
  /// against a zero tolerance, reads as the largest float (3.4e38).
  double max_error_ratio = 0;
  int trial = 0;  ///< 1-based trial in which it was reached (0: no trial compared this tensor)
  PTXBENCH_PROTOCOL_EQUALITY(TensorMargin)
};

/// One workload's margin over its trials.
struct WorkloadMargin {
  std::vector<TensorMargin> tensors;  ///< every output tensor, in the task's order
  double max_error_ratio = 0;         ///< the largest of the tensors'
  bool borderline = false;            ///< max_error_ratio in the policy's band, and no other kind of failure
  int trials_run = 0;                 ///< every trial, planned and extra
  int trials_failed = 0;              ///< of them, those that failed (any reason)
  int extra_trials = 0;               ///< of them, run because the workload was borderline
  double failure_rate = 0;            ///< trials_failed / trials_run: the estimate for one trial
  /// why the extra trials ended: "" (none ran: not borderline), "count" (every extra trial the policy
  /// allows ran; with extra_trials 0, none), "budget" (the next would have passed the time budget) or
  /// "left_band" (an extra trial's error left the band, or failed another way: no longer borderline)
  std::string extra_stopped_by;
  PTXBENCH_PROTOCOL_EQUALITY(WorkloadMargin)
};

/// Takes one trial's ratio for `tensor` into the margin (a tensor not seen yet is appended).
void note_ratio(WorkloadMargin &m, const std::string &tensor, double ratio, int trial);

/// Whether the margin is borderline under `p`; `other_failure`: a NaN, unwritten element, guard damage or
/// input change was seen (those are not near the edge).
bool is_borderline(const WorkloadMargin &m, bool other_failure, const BorderlinePolicy &p);

/// Before extra trial number m.extra_trials + 1: "" to run it, else why not ("count" or "budget").
/// `spent_seconds`: what the job's extra trials took so far; `trial_seconds`: the last trial's time.
std::string extra_trial_stop(const WorkloadMargin &m, double spent_seconds, double trial_seconds,
                             const BorderlinePolicy &p);

/// Sets the trial counts and the failure rate.
void count_trials(WorkloadMargin &m, int trials_run, int trials_passed);

void to_json(nlohmann::json &j, const TensorMargin &t);
void from_json(const nlohmann::json &j, TensorMargin &t);
void to_json(nlohmann::json &j, const WorkloadMargin &m);
/// Throws ProtocolError naming the field on a record not of that form.
void from_json(const nlohmann::json &j, WorkloadMargin &m);

}  // namespace ptxbench::protocol
