// Launch limits of the target architectures, checked before any GPU is involved
// (CUDA programming guide, compute capability tables; per-architecture figures in tasks/arch.hpp).
#pragma once

#include <cstdint>
#include <string_view>

#include "tasks/arch.hpp"

namespace ptxbench::evaluator::detail {

inline constexpr std::int64_t kMaxGridX = 2147483647;      ///< blocks
inline constexpr std::int64_t kMaxGridYZ = 65535;          ///< blocks
inline constexpr std::int64_t kMaxThreadsPerBlock = 1024;  ///< threads
inline constexpr std::int64_t kMaxClusterSize = 16;  ///< CTAs, with the non-portable cluster size attribute

/// Shared memory a block may use (static + dynamic, opt-in), bytes (tasks/arch.hpp); an unknown
/// architecture gets the Hopper figure (the task loader refuses unknown ones).
inline std::int64_t max_shared_bytes_per_block(std::string_view arch) {
  const tasks::ArchFacts *facts = tasks::arch_facts(arch);
  return facts ? facts->max_shared_bytes_per_block : tasks::arch_facts("sm_90a")->max_shared_bytes_per_block;
}

/// 32-bit registers a block may use, likewise.
inline std::int64_t registers_per_block(std::string_view arch) {
  const tasks::ArchFacts *facts = tasks::arch_facts(arch);
  return facts ? facts->registers_per_block : tasks::arch_facts("sm_90a")->registers_per_block;
}

}  // namespace ptxbench::evaluator::detail
