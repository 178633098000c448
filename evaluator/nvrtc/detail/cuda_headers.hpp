// What NVRTC needs to compile a ```cuda candidate the way nvcc compiles a device-only .cu for sm_90a:
// the toolkit's include folders (found, not assumed), and small in-memory headers standing in for the
// C and C++ standard headers, which NVRTC does not ship and the host's (glibc, libstdc++) cannot serve.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptxbench::evaluator::detail {

struct CudaIncludeDirs {
  std::vector<std::filesystem::path> dirs;  ///< <root>/include, its cccl/ (libcu++, CUB), targets/*/include
  std::string found_by;  ///< "CUDA_PATH", "CUDA_HOME", "nvcc on PATH" or "the NVRTC library"
};

/// The toolkit's include folders: $CUDA_PATH, $CUDA_HOME, nvcc on PATH, then the folder of the NVRTC
/// library this process loaded (the NVRTC child runs with a scrubbed environment, where only that is left).
/// A root counts when <root>/include/cuda_runtime.h exists. nullopt when none is found.
std::optional<CudaIncludeDirs> find_cuda_include_dirs();

/// (name, contents) of the stand-in headers: <cstdint> <stdint.h> <cstddef> <stddef.h> <climits>
/// <limits.h> <cfloat> <float.h> <cmath> <math.h> <cstdlib> <stdlib.h> <cstring> <string.h> <cstdio>
/// <stdio.h> <cassert> <assert.h> <type_traits> <utility> <limits> <array>, and the prelude.
const std::vector<std::pair<std::string, std::string>> &nvrtc_shim_headers();

/// The header NVRTC includes before the candidate: what nvcc makes implicit (INFINITY, NAN, HUGE_VAL[F],
/// the CUDART_* constants) plus FLT_MAX and friends, which code written for nvcc uses freely.
inline constexpr std::string_view kPreludeName = "ptxbench_prelude.h";

/// A sentence for an NVRTC log that shows host-only code (a host header, main, a <<<...>>> launch,
/// host runtime calls): the candidate is device code only. "" when the log shows none.
std::string host_code_hint(std::string_view log);

}  // namespace ptxbench::evaluator::detail
