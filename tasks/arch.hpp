// One table of facts about the architectures tasks may target: names, the PTX ISA they need, launch
// limits, and the peak rates of the GPU the prompts quote. Public figures (NVIDIA's product pages and
// the CUDA programming guide's compute-capability tables); the evaluator, the task loader and the
// prompt builder read them here instead of keeping their own copies.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ptxbench::tasks {

/// Peak rates of one GPU of an architecture (dense, no sparsity).
struct PeakRates {
  std::string_view gpu;         ///< the GPU they belong to, e.g. "H200 SXM"
  double bf16_flops_per_s = 0;  ///< FLOP/s, bf16 tensor cores
  double fp8_flops_per_s = 0;   ///< FLOP/s, fp8 tensor cores
  double dram_bytes_per_s = 0;  ///< bytes/s of DRAM bandwidth
  int sm_count = 0;             ///< SMs
};

struct ArchFacts {
  std::string_view arch;        ///< the task's `.target`, e.g. "sm_90a"
  std::string_view family;      ///< e.g. "Hopper (H100/H200)"
  int min_ptx_version_x10 = 0;  ///< PTX ISA version x 10 the target needs (80 = 8.0)
  /// what `.target <arch>` enables over the plain target, for the message when the 'a' is missing
  std::string_view arch_specific_features;
  std::int64_t max_shared_bytes_per_block = 0;  ///< bytes, static + dynamic (opt-in)
  std::int64_t registers_per_block = 65536;     ///< 32-bit registers
  std::optional<PeakRates> peaks;               ///< nullopt = no reference GPU in this table
};

/// Every architecture a task may name, in order.
std::span<const ArchFacts> known_archs();

/// The facts for `arch`; nullptr when it is not a known architecture.
const ArchFacts *arch_facts(std::string_view arch);

}  // namespace ptxbench::tasks
