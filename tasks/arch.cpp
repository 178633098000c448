#include "tasks/arch.hpp"

namespace ptxbench::tasks {
namespace {

constexpr std::int64_t kSharedBytes227K = 232448;  // 227 KB: sm_90 and sm_100 class
constexpr std::int64_t kSharedBytes99K = 101376;   // 99 KB: sm_120 class
// Hopper's dense tensor-core rate: 4096 bf16 FLOP per clock per SM (8192 fp8), at the maximum SM clock the
// device reports (1980 MHz on the H200), as the worker's speed-of-light floor computes it from the device
// attributes: 1070 TFLOP/s. NVIDIA's datasheet quotes 989 TFLOP/s, the same rate at a 1830 MHz boost clock.
constexpr double kHopperFlopsPerClockPerSm = 4096;
constexpr double kH200MaxSmClockHz = 1.98e9;

const ArchFacts kArchs[] = {
    {"sm_90a", "Hopper (H100/H200)", 80, "wgmma.mma_async, setmaxnreg, multicast TMA", kSharedBytes227K,
     65536,
     PeakRates{"H200 SXM", kHopperFlopsPerClockPerSm * 132 * kH200MaxSmClockHz,
               2 * kHopperFlopsPerClockPerSm * 132 * kH200MaxSmClockHz, 4.8e12, 132}},
    {"sm_100a", "Blackwell (B200)", 86, "tcgen05.*, TMEM", kSharedBytes227K, 65536,
     PeakRates{"B200", 2250e12, 4500e12, 8.0e12, 148}},
    {"sm_103a", "Blackwell Ultra (B300)", 86, "tcgen05.*, TMEM", kSharedBytes227K, 65536, std::nullopt},
    {"sm_120a", "Blackwell (RTX 50xx)", 86, "the sm_120a-specific instructions", kSharedBytes99K, 65536,
     std::nullopt},
};

}  // namespace

std::span<const ArchFacts> known_archs() {
  return kArchs;
}

const ArchFacts *arch_facts(std::string_view arch) {
  for (const auto &a : kArchs)
    if (a.arch == arch) return &a;
  return nullptr;
}

}  // namespace ptxbench::tasks
