// Launch limits of the target architectures, checked before any GPU is involved
// (CUDA programming guide, compute capability 9.0 / 10.0 tables).
#pragma once

#include <cstdint>
#include <string_view>

namespace ptxbench::evaluator::detail {

inline constexpr std::int64_t kMaxGridX = 2147483647;      ///< blocks
inline constexpr std::int64_t kMaxGridYZ = 65535;          ///< blocks
inline constexpr std::int64_t kMaxThreadsPerBlock = 1024;  ///< threads
inline constexpr std::int64_t kMaxClusterSize = 16;  ///< CTAs, with the non-portable cluster size attribute
inline constexpr std::int64_t kRegistersPerSm = 65536;  ///< 32-bit registers per SM (and per block)

/// Shared memory a block may use (static + dynamic, opt-in), bytes: 227 KB on sm_90 and sm_100.
inline std::int64_t max_shared_bytes_per_block(std::string_view arch) {
  (void)arch;  // equal on every architecture the tasks target today
  return 232448;
}

}  // namespace ptxbench::evaluator::detail
