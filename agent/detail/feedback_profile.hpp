// The speed section of a correct kernel's feedback, built from the typed profile record (the profile
// stage): what bounds the kernel against the library's figure for the same unit, duration and clock,
// memory traffic, occupancy and its limiter. Bounded to a few lines.
#pragma once

#include <string>

#include "evaluator/verdict.hpp"

namespace ptxbench::agent::detail {

/// "" when the verdict has no profile stage at all (GPU stages off, or a verdict from before the stage);
/// one line saying why when the stage did not measure; otherwise the section.
std::string profile_section(const evaluator::Verdict &v, const std::string &library);

}  // namespace ptxbench::agent::detail
