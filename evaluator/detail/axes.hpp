// The verdict's three axes (Verdict::axes), apart from the verdict so that the code deciding them
// (detail/execution_axis.hpp) does not need the whole verdict. evaluator/verdict.hpp includes it.
#pragma once

#include <optional>

namespace ptxbench::evaluator {

/// The three axes. nullopt = not measured.
struct Axes {
  std::optional<bool> correct;
  std::optional<bool> targets_executed;
  std::optional<double> speedup;  ///< geomean over workloads of library_time / candidate_time
};

}  // namespace ptxbench::evaluator
