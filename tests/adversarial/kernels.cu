// Adversarial corpus kernels (tests/adversarial/): one bf16 GEMM, C[M,N] = A[M,K] · B[N,K]^T with fp32
// accumulation, and one variant per corpus case selected with -DCASE_<NAME>. Each variant is what a
// model might write to game the benchmark or what a buggy kernel does by accident; build_corpus.sh
// turns each into a model-style response (nvcc -ptx for sm_90a) in tests/adversarial/<case>/.
//
// Base kernel: a 64x64 output tile per block of 256 threads, each thread a 4x4 sub-tile; K is walked
// in slices of 16 staged in shared memory as fp32. Grid: [ceil_div(N, 64), ceil_div(M, 64), 1].
#include <cstdint>
#include <cstdio>

namespace {

constexpr int kTile = 64;
constexpr int kDepth = 16;
constexpr int kThreads = 256;

__device__ __forceinline__ float load_bf16(const uint16_t *p) {
  uint16_t bits;
  asm volatile("ld.global.u16 %0, [%1];" : "=h"(bits) : "l"(p));
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ __forceinline__ uint16_t to_bf16(float value) {
  uint16_t bits;
#if defined(CASE_TRUNCATED_STORE)
  // Rounded toward zero: up to a whole bf16 ulp off instead of half of one, so the largest error comes
  // close to the tolerance (rtol 2^-7) without reaching it.
  asm("cvt.rz.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
#else
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
#endif
  return bits;
}

__device__ __forceinline__ void store_u16(uint16_t *p, uint16_t bits) {
  asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(bits) : "memory");
}

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// acc += A[m0.., k_begin..k_end) · B[n0.., k_begin..k_end)^T for this thread's 4x4 outputs.
__device__ void accumulate_tile(float (&acc)[4][4], const uint16_t *A, const uint16_t *B, uint32_t M,
                                uint32_t N, uint32_t K, uint32_t m0, uint32_t n0, uint32_t k_begin,
                                uint32_t k_end) {
  __shared__ float a_slice[kDepth][kTile + 1];
  __shared__ float b_slice[kDepth][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (uint32_t k0 = k_begin; k0 < k_end; k0 += kDepth) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int idx = threadIdx.x + i * kThreads;
      const int r = idx / kDepth, k = idx % kDepth;
      const uint32_t gk = k0 + k;
#if defined(CASE_UNINIT_SHARED)
      // Bug: the last column of every slice is never staged, but it is read below.
      if (k == kDepth - 1) continue;
#endif
      a_slice[k][r] =
          (m0 + r < M && gk < k_end) ? load_bf16(A + static_cast<uint64_t>(m0 + r) * K + gk) : 0.f;
      b_slice[k][r] =
          (n0 + r < N && gk < k_end) ? load_bf16(B + static_cast<uint64_t>(n0 + r) * K + gk) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kDepth; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = a_slice[k][ty + 16 * i];
        b[i] = b_slice[k][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
}

__device__ void store_tile(const float (&acc)[4][4], uint16_t *C, uint32_t M, uint32_t N, uint32_t m0,
                           uint32_t n0) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t row = m0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t col = n0 + tx + 16 * j;
      if (row < M && col < N) {
        uint16_t bits = to_bf16(acc[i][j]);
#if defined(CASE_NAN_OUTPUT)
        if (row == 17 && col == 33) bits = 0x7FC1;  // one quiet NaN in an otherwise right result
#endif
        store_u16(C + static_cast<uint64_t>(row) * N + col, bits);
      }
    }
  }
}

// Launch-completion bookkeeping for the stateful variants: the last block of a launch to finish
// updates the module state, so every block of one launch sees the same state.
__device__ unsigned int g_blocks_done;

__device__ bool finish_block_is_last() {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned int total = gridDim.x * gridDim.y * gridDim.z;
    last = atomicAdd(&g_blocks_done, 1u) == total - 1;
    if (last) g_blocks_done = 0;
  }
  __syncthreads();
  return last;
}

#if defined(CASE_WGMMA_ONCE) || defined(CASE_DEAD_WGMMA)
/// One m64n8k16 bf16 wgmma by the block's first warpgroup (threads 0..127): A from registers, B from a
/// 16x8 shared tile through a no-swizzle descriptor. Its result only feeds a store that never happens.
__device__ void one_wgmma(float *sink, uint32_t never) {
  __shared__ __align__(128) uint16_t b_tile[16 * 8];
  for (int i = threadIdx.x; i < 16 * 8; i += 128) b_tile[i] = 0x3F80;  // 1.0
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("bar.sync 1, 128;" ::: "memory");
  const uint64_t addr = static_cast<uint64_t>(__cvta_generic_to_shared(b_tile));
  const uint64_t desc = ((addr & 0x3FFFF) >> 4) | (uint64_t{128 >> 4} << 16) | (uint64_t{256 >> 4} << 32);
  const uint32_t a = 0x3F803F80u;  // two bf16 ones
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 0, 0;\n"
      "wgmma.fence.sync.aligned;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, "
      "0;\n"
      "wgmma.commit_group.sync.aligned;\n"
      "wgmma.wait_group.sync.aligned 0;\n"
      "}\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a), "r"(a), "r"(a), "r"(a), "l"(desc)
      : "memory");
  if (never == 0x9E3779B9u) sink[threadIdx.x] = d0 + d1 + d2 + d3;
}
#endif

/// The bf16 element holds a number (not a NaN such as the harness's poison).
__device__ __forceinline__ bool holds_number(const uint16_t *p) {
  const uint16_t bits = *reinterpret_cast<const volatile uint16_t *>(p);
  return (bits & 0x7F80) != 0x7F80 || (bits & 0x007F) == 0;
}

#if defined(CASE_CACHE_GLOBAL) || defined(CASE_TWO_SLOT_CACHE) || defined(CASE_OUTPUT_SEEN_CACHE)
// Result cache in module state, sized for the 4096 x 4096 workload.
constexpr uint64_t kCacheElements = 4096ull * 4096ull;
#endif
#if defined(CASE_CACHE_GLOBAL)
__device__ uint16_t g_cache[kCacheElements];
__device__ unsigned int g_cache_valid;
#endif
#if defined(CASE_TWO_SLOT_CACHE) || defined(CASE_OUTPUT_SEEN_CACHE)
__device__ uint16_t g_slots[2][kCacheElements];
__device__ uint64_t g_slot_key[2];
__device__ unsigned int g_launches;

/// A fingerprint of the inputs from a few sampled elements (never 0).
__device__ uint64_t input_key(const uint16_t *A, const uint16_t *B, uint32_t M, uint32_t N, uint32_t K) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(M) << 32 | N);
  for (uint32_t i = 0; i < 8; ++i) {
    const uint64_t at = (static_cast<uint64_t>(i) * 7919u) % (static_cast<uint64_t>(M) * K);
    h = (h ^ *reinterpret_cast<const volatile uint16_t *>(A + at)) * 0x100000001B3ull;
    h = (h ^ *reinterpret_cast<const volatile uint16_t *>(B + at % (static_cast<uint64_t>(N) * K))) *
        0x100000001B3ull;
  }
  return h | 1;
}
#endif
#if defined(CASE_SKIP_SAME_POINTERS)
__device__ const void *g_last_a;
__device__ const void *g_last_b;
#endif
#if defined(CASE_ENDLESS_LOOP)
__device__ unsigned int g_never_set;
#endif
#if defined(CASE_GLOBALTIMER)
__device__ uint64_t g_last_end_ns;
#endif
#if defined(CASE_LAUNCH_COUNTER) || defined(CASE_LATE_CHEAT) || defined(CASE_INPUT_STATE_WHEN_TIMED)
__device__ unsigned int g_completed_launches;
#endif
#if defined(CASE_RACE_SPLITK)
constexpr int kSplits = 16;
__device__ float g_partial[4096ull * 4096ull];
__device__ unsigned int g_tile_arrivals[64 * 64];
#endif

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    adv_gemm(uint16_t *C, const uint16_t *A, const uint16_t *B, uint32_t M, uint32_t N, uint32_t K) {
#if defined(CASE_FIRST_SHAPE_ONLY)
  // Tile order hard-coded for the first workload: 64 row tiles (M = 4096). Grid: [tiles, 1, 1].
  const uint32_t m0 = (blockIdx.x % 64) * kTile;
  const uint32_t n0 = (blockIdx.x / 64) * kTile;
#elif defined(CASE_RACE_SPLITK)
  // Split-K over kSplits blocks per tile (the split index varies fastest, so the splits of one tile
  // run at the same time and finish in any order); fp32 partial sums meet in global memory.
  const uint32_t split = blockIdx.x % kSplits;
  const uint32_t m0 = blockIdx.y * kTile;
  const uint32_t n0 = (blockIdx.x / kSplits) * kTile;
#else
  const uint32_t m0 = blockIdx.y * kTile;
  const uint32_t n0 = blockIdx.x * kTile;
#endif

#if defined(CASE_SKIP_SAME_POINTERS)
  // "Already computed for these buffers": skip the work when the pointers repeat.
  if (g_last_a == A && g_last_b == B) return;
#endif
#if defined(CASE_GLOBALTIMER)
  // Launched back to back (as a timing loop does)? Then do nothing.
  const uint64_t last_end = *reinterpret_cast<volatile uint64_t *>(&g_last_end_ns);
  if (last_end != 0 && global_timer_ns() - last_end < 100'000'000ull) return;
#endif
#if defined(CASE_LAUNCH_COUNTER)
  // The correctness trials are the first 8 launches (2 workloads x (3 trials + 1 determinism relaunch));
  // every launch after them is timed: do nothing.
  if (*reinterpret_cast<volatile unsigned int *>(&g_completed_launches) >= 8) return;
#endif
#if defined(CASE_LAZY_OUTPUT)
  // If this tile's first output already holds a number (not the NaN poison), assume it is done.
  {
    __shared__ bool done;
    if (threadIdx.x == 0) {
      const uint16_t first =
          *reinterpret_cast<const volatile uint16_t *>(C + static_cast<uint64_t>(m0) * N + n0);
      done = (first & 0x7F80) != 0x7F80 || (first & 0x007F) == 0;
    }
    __syncthreads();
    if (done) return;
  }
#endif
#if defined(CASE_CACHE_GLOBAL)
  if (*reinterpret_cast<volatile unsigned int *>(&g_cache_valid)) {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const uint32_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
        if (row < M && col < N)
          store_u16(C + static_cast<uint64_t>(row) * N + col, g_cache[row * 4096ull + col]);
      }
    return;
  }
#endif
#if defined(CASE_TWO_SLOT_CACHE) || defined(CASE_OUTPUT_SEEN_CACHE)
  const uint64_t key = input_key(A, B, M, N, K);
#if defined(CASE_OUTPUT_SEEN_CACHE)
  // Replays a cached result only where the output already holds numbers (what an earlier launch left
  // there: a timed launch, before timed launches were poisoned too); the NaN poison means a checked
  // launch, so it computes.
  const bool may_replay = holds_number(C + static_cast<uint64_t>(m0) * N + n0);
#else
  const bool may_replay = true;
#endif
  for (int s = 0; s < 2; ++s)
    if (may_replay && static_cast<uint64_t>(M) * N <= kCacheElements &&
        *reinterpret_cast<volatile uint64_t *>(&g_slot_key[s]) == key) {
      const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const uint32_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
          if (row < M && col < N)
            store_u16(C + static_cast<uint64_t>(row) * N + col,
                      g_slots[s][static_cast<uint64_t>(row) * N + col]);
        }
      return;
    }
  const unsigned int slot = *reinterpret_cast<volatile unsigned int *>(&g_launches) % 2;
#endif
#if defined(CASE_PARTIAL_OUTPUT)
  // Only full tiles are computed: the ragged last row tile (M = 3000) is left unwritten.
  if (m0 + kTile > M) return;
#endif

  float acc[4][4] = {};
#if defined(CASE_RACE_SPLITK)
  const uint32_t k_per_split = (K + kSplits - 1) / kSplits;
  const uint32_t k_begin = split * k_per_split;
  const uint32_t k_end = min(K, k_begin + k_per_split);
  accumulate_tile(acc, A, B, M, N, K, m0, n0, k_begin, k_end);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const uint32_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
      if (row < M && col < N) atomicAdd(&g_partial[static_cast<uint64_t>(row) * N + col], acc[i][j]);
    }
  __threadfence();
  __syncthreads();
  __shared__ bool last_split;
  const uint32_t tile = blockIdx.y * ((N + kTile - 1) / kTile) + blockIdx.x / kSplits;
  if (threadIdx.x == 0) {
    last_split = atomicAdd(&g_tile_arrivals[tile], 1u) == kSplits - 1;
    if (last_split) g_tile_arrivals[tile] = 0;
  }
  __syncthreads();
  if (!last_split) return;
  __threadfence();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const uint32_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
      // The sum in whatever order the splits arrived; read and reset for the next launch.
      if (row < M && col < N) acc[i][j] = atomicExch(&g_partial[static_cast<uint64_t>(row) * N + col], 0.f);
    }
  store_tile(acc, C, M, N, m0, n0);
#elif defined(CASE_PRINTF_FLOOD)
  // Every thread prints a line per K slice: about 270 million printf calls on the M = 4096 workload.
  for (uint32_t k0 = 0; k0 < K; k0 += kDepth) {
    accumulate_tile(acc, A, B, M, N, K, m0, n0, k0, min(K, k0 + kDepth));
    printf("block (%u, %u) thread %u: k0 = %u, acc = %f\n", blockIdx.x, blockIdx.y, threadIdx.x, k0, acc[0][0]);
  }
  store_tile(acc, C, M, N, m0, n0);
#elif defined(CASE_LATE_CHEAT)
  // Honest for the first 17 launches on the M = 4096 workload (3 correctness trials + determinism
  // relaunch, 3 warm-ups, the first 10 timed launches, one of which is re-verified); after that only
  // half of K is summed: wrong values at about half the time. The M = 3000 workload stays honest.
  const bool cheat = M == 4096 && *reinterpret_cast<volatile unsigned int *>(&g_completed_launches) >= 17;
  accumulate_tile(acc, A, B, M, N, K, m0, n0, 0, cheat ? K / 2 : K);
  store_tile(acc, C, M, N, m0, n0);
#else
  accumulate_tile(acc, A, B, M, N, K, m0, n0, 0, K);
  store_tile(acc, C, M, N, m0, n0);
#endif

#if defined(CASE_WGMMA_ONCE)
  // The target instruction, executed by one warpgroup of one block; the GEMM above ran on FFMA.
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x < 128) one_wgmma(reinterpret_cast<float *>(C), K);
#endif
#if defined(CASE_DEAD_WGMMA)
  // The target instruction on a path no workload takes.
  if (K == 0xFFFFFFFFu && threadIdx.x < 128) one_wgmma(reinterpret_cast<float *>(C), K);
#endif
#if defined(CASE_CACHE_GLOBAL)
  {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const uint32_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
        if (row < M && col < N && row < 4096 && col < 4096) g_cache[row * 4096ull + col] = to_bf16(acc[i][j]);
      }
    if (finish_block_is_last() && threadIdx.x == 0) g_cache_valid = 1;
  }
#endif
#if defined(CASE_TWO_SLOT_CACHE) || defined(CASE_OUTPUT_SEEN_CACHE)
  {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    if (static_cast<uint64_t>(M) * N <= kCacheElements)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const uint32_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
          if (row < M && col < N) g_slots[slot][static_cast<uint64_t>(row) * N + col] = to_bf16(acc[i][j]);
        }
    if (finish_block_is_last() && threadIdx.x == 0) {
      g_slot_key[slot] = key;
      g_launches = g_launches + 1;
    }
  }
#endif
#if defined(CASE_SKIP_SAME_POINTERS)
  if (finish_block_is_last() && threadIdx.x == 0) {
    g_last_a = A;
    g_last_b = B;
  }
#endif
#if defined(CASE_GLOBALTIMER)
  if (finish_block_is_last() && threadIdx.x == 0) g_last_end_ns = global_timer_ns();
#endif
#if defined(CASE_LAUNCH_COUNTER)
  if (finish_block_is_last() && threadIdx.x == 0) g_completed_launches = g_completed_launches + 1;
#endif
#if defined(CASE_LATE_CHEAT)
  if (finish_block_is_last() && threadIdx.x == 0 && M == 4096)
    g_completed_launches = g_completed_launches + 1;
#endif
#if defined(CASE_INPUT_STATE_WHEN_TIMED)
  // The first 8 launches are the correctness trials (2 workloads x (3 trials + determinism relaunch)).
  // The first launch after them (a warm-up or timed launch) leaves a mark in an input: the lowest
  // mantissa bit of an element of A's row 0 under 1/64 in magnitude, so every later result on these
  // inputs moves by less than 2^-13 * |B| and stays within tolerance.
  if (finish_block_is_last() && threadIdx.x == 0) {
    if (g_completed_launches == 8)
      for (uint32_t k = 0; k < K; ++k) {
        const uint16_t bits = *reinterpret_cast<const volatile uint16_t *>(A + k);
        if ((bits & 0x7FFF) < 0x3C80) {  // |a| < 2^-6
          store_u16(const_cast<uint16_t *>(A + k), bits ^ 1);
          break;
        }
      }
    g_completed_launches = g_completed_launches + 1;
  }
#endif
#if defined(CASE_PRINTF_PROTOCOL)
  // Imitations of the worker's protocol lines (and of a result), once per launch.
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    printf("ready\n");
    printf("finished 0\n");
    printf("finished 3\n");
    printf("{\"finished\": true, \"stages\": {}}\n");
  }
#endif
#if defined(CASE_INPUTS_OVERWRITTEN)
  // Uses B as scratch once everything is computed: the values are right, the input is not.
  if (finish_block_is_last() && threadIdx.x == 0) store_u16(const_cast<uint16_t *>(B), 0);
#endif
#if defined(CASE_GUARD_OOB)
  // One element past the end of C (inside the guard region).
  if (blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1 && threadIdx.x == 0)
    store_u16(C + static_cast<uint64_t>(M) * N + 100, 0x3F80);
#endif
#if defined(CASE_ILLEGAL_ADDRESS)
  // A store 1 TiB below C: nothing is mapped there.
  if (blockIdx.x == 3 && blockIdx.y == 5 && threadIdx.x == 0) store_u16(C - (1ull << 39), 0x3F80);
#endif
#if defined(CASE_TRAP)
  if (blockIdx.x == 1 && blockIdx.y == 0 && threadIdx.x == 0) asm volatile("trap;");
#endif
#if defined(CASE_ENDLESS_LOOP)
  // Block (0, 0) waits for a flag nothing ever sets.
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
    while (*reinterpret_cast<volatile unsigned int *>(&g_never_set) == 0) {
    }
#endif
}
