// The correctness stage (correctness_stage.cpp): every shown workload's trials against the fp32
// reference, guard regions, input checksums and a determinism relaunch. The generalization stage checks
// the hidden workloads with the same check_workload.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/margin.hpp"
#include "evaluator/protocol/mismatch.hpp"
#include "evaluator/worker/detail/stage_context.hpp"

namespace ptxbench::worker::detail {

class CorrectnessStage {
 public:
  /// One workload's trials, summed.
  struct WorkloadCheck {
    std::optional<protocol::FirstMismatch> worst_first;  ///< of the first trial with mismatches
    std::optional<protocol::MismatchPattern> pattern;    ///< of the first trial with mismatches
    double max_abs = 0, max_rel = 0;
    std::uint64_t mismatches = 0, nans = 0, unwritten = 0, damage = 0;
    bool mutated = false, deterministic = true;
    int passed = 0, trials_run = 0, trials = 0;  ///< trials: planned; trials_run counts extra trials too
    protocol::WorkloadMargin margin;  ///< the largest error over tolerance; borderline extra trials
    bool ok() const { return passed == trials_run && trials_run >= trials; }
    /// A failure that is not a value near the tolerance.
    bool other_failure() const { return nans || unwritten || damage || mutated; }
  };

  explicit CorrectnessStage(StageContext &ctx) : ctx_(ctx) {}

  /// Checks every shown workload and writes the stage; true when the status is ok.
  bool run();

  /// Sets stopped_early at the first failing trial unless every trial is asked for; a trial that fails only
  /// by values near the tolerance (borderline) lets the planned trials and the extra ones run first.
  /// `stage` names the stage a fault is charged to; `wi` keys the trial seeds and the inputs kept for timing.
  WorkloadCheck check_workload(const char *stage, const JobWorkload &w, std::size_t wi, PhaseSeconds &phases,
                               bool &stopped_early);
  std::string correctness_failure_text(const JobWorkload &w, const WorkloadCheck &c) const;
  /// One workload's row of correctness figures.
  protocol::CorrectnessWorkload workload_row(const JobWorkload &w, const WorkloadCheck &c) const;

 private:
  struct CorrectnessBuffers;  // one workload's tensors, reference, snapshots (correctness_stage.cpp)

  /// One trial: fresh inputs, reference, launch, compare, guards and input checksum; true when it passed.
  bool run_trial(const char *stage, const JobWorkload &w, std::size_t wi, int trial, CorrectnessBuffers &b,
                 PhaseSeconds &phases, WorkloadCheck &c);
  /// A second identical launch gives the same bits.
  bool same_bits_on_relaunch(const char *stage, const JobWorkload &w, CorrectnessBuffers &b);
  /// "borderline: the largest error is 0.93x the tolerance; 8 extra trials ..., 0 of 11 trials failed".
  static std::string margin_text(const WorkloadCheck &c);

  StageContext &ctx_;
  /// s: borderline extra trials so far, the shown and the hidden workloads' (BorderlinePolicy::budget)
  double extra_trial_seconds_ = 0;
};

}  // namespace ptxbench::worker::detail
