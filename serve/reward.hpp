// The reward of a verdict for RL trainers: the verdict's typed parts (compiled, correct, targets executed
// with counts and work share, speedup with its interval, suspicious flags, generalization, feedback text)
// and, beside them, an optional scalar from a documented, configurable formula (RewardFormula).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "evaluator/verdict.hpp"
#include "util/expected.hpp"

namespace ptxbench::serve {

/// scalar = suspicious_value                                           if the verdict is suspicious
///        = timeout_value                                              if no verdict came in time
///        = (compiled·[compiled] + correct·[correct] + targets·[correct ∧ targets executed]
///           + speedup·[correct]·min(speedup, speedup_cap)/speedup_cap) · (no_generalize if generalizes
///           is false, else 1)                                         otherwise
/// An axis that was not measured (GPU stages skipped) counts 0; the parts say which were measured.
struct RewardFormula {
  bool enabled = true;  ///< false: no scalar (null), only the parts
  double compiled = 0.1;
  double correct = 0.4;
  double targets = 0.2;
  double speedup = 0.3;
  double speedup_cap = 2.0;     ///< speedups above it earn no more
  double no_generalize = 0.5;   ///< factor when the hidden workloads fail
  double suspicious_value = 0;  ///< the whole scalar for a suspicious verdict
  double timeout_value = 0;     ///< the whole scalar when the deadline passed without a verdict
  nlohmann::json to_json() const;
};

/// Reads "key=value,key=value" (keys as in RewardFormula's JSON; "none" disables the scalar). Error names
/// the key.
util::Expected<RewardFormula> parse_reward_formula(std::string_view text);

/// The typed parts of a verdict and the scalar (null when the formula is disabled).
/// `feedback`: the repair prompt the run loop would send for it; `deadline_exceeded`: the verdict stands for
/// a request whose deadline passed first (a `timeout` made by the service, not by the kernel).
nlohmann::json reward_of(const evaluator::Verdict &verdict, const std::string &feedback,
                         const RewardFormula &formula, bool deadline_exceeded = false);

/// The scalar alone for the parts of reward_of (nullopt when disabled).
std::optional<double> reward_scalar(const nlohmann::json &parts, const RewardFormula &formula);

}  // namespace ptxbench::serve
