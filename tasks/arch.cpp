#include "tasks/arch.hpp"

namespace ptxbench::tasks {
namespace {

constexpr std::int64_t kSharedBytes227K = 232448;  // 227 KB: sm_90 and sm_100 class
constexpr std::int64_t kSharedBytes99K = 101376;   // 99 KB: sm_120 class

const ArchFacts kArchs[] = {
    {"sm_90a", "Hopper (H100/H200)", 80, "wgmma.mma_async, setmaxnreg, multicast TMA", kSharedBytes227K,
     65536, PeakRates{"H200 SXM", 989e12, 1979e12, 4.8e12, 132}},
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
