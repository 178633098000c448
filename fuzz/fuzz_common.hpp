// Shared helpers of the libFuzzer targets (fuzz/*.cpp). Each target feeds untrusted bytes to one
// parsing entry point; an escaped exception, a sanitizer report or a hang is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tasks/task.hpp"

namespace ptxbench::fuzz {

inline std::string_view as_text(const std::uint8_t *data, std::size_t size) {
  return {reinterpret_cast<const char *>(data), size};
}

/// A GEMM task like the suite's (bf16 A[M,K], B[N,K] -> C[M,N]; two workloads, one ragged; wgmma and
/// TMA targets), built in code so that the manifest target needs no files.
tasks::Task gemm_task();

}  // namespace ptxbench::fuzz
