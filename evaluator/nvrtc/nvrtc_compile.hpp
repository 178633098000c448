// NVRTC in this process: CUDA device code -> PTX. Only the ptxbench-nvrtc child links this library, so
// an untrusted compile (a crash, a hang, an include of /dev/zero) never runs inside the evaluator; the
// evaluator reaches it through nvrtc_compile_in_child (evaluator/compile.hpp).
#pragma once

#include <string>

#include "util/expected.hpp"

namespace ptxbench::evaluator {

/// Compiles CUDA device code for `arch` (e.g. "sm_90a" -> compute_90a) to PTX. Error = the NVRTC log,
/// led by a hint when the log shows host-only code.
util::Expected<std::string> nvrtc_compile_in_process(const std::string &source, const std::string &arch);

}  // namespace ptxbench::evaluator
