// PROBE probe_edge_tiles (the kernel of gemm_n4096_k4096/probe_edge_tiles): correctness beyond the headline shape.
// The mma.sync kernel is exact whenever M is a multiple of 128, but the partial last row tile reads the
// wrong rows of A. Expected verdict: correct at M=4096, incorrect at M=3000 with every mismatch in
// rows >= 2944 (the last, partial tile).
#include <cstdint>

namespace {

constexpr int kBlockM = 128;
constexpr int kBlockN = 128;
constexpr int kBlockK = 32;  // bf16 elements per smem row: 64 bytes = 4 chunks of 16 bytes
constexpr int kStages = 4;   // cp.async pipeline depth
constexpr int kThreads = 256;
constexpr int kTileBytes = kBlockM * kBlockK * 2;  // one operand, one stage: 8 KiB
constexpr int kStageBytes = 2 * kTileBytes;        // A and B: 16 KiB

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Byte offset of 16-byte chunk `chunk` (0..3) of row `row` in a 64-byte-row tile. The XOR with
// (row / 2) % 4 spreads the 8 rows an ldmatrix phase reads over all 32 banks.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

// 16-byte async copy; src_bytes == 0 zero-fills the destination (rows or K past the edge).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// Issues the cp.async copies of one K slice (A rows m0.., B rows n0.., K columns k0..k0+31).
__device__ __forceinline__ void load_slice(uint32_t stage_base, const uint16_t *A, const uint16_t *B,
                                           uint32_t M, uint32_t N, uint32_t K, uint32_t m0, uint32_t n0,
                                           uint32_t k0) {
  // Each operand tile is 128 rows x 4 chunks = 512 chunks: 2 per thread per operand.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int row = idx / 4;
    const int chunk = idx % 4;
    const uint32_t gk = k0 + chunk * 8;
    const bool k_ok = gk + 8 <= K;
    const bool a_ok = k_ok && m0 + row < M;
    const bool b_ok = k_ok && n0 + row < N;
    const uint16_t *a_src = a_ok ? A + static_cast<uint64_t>(m0 + row) * K + gk : A;
    const uint16_t *b_src = b_ok ? B + static_cast<uint64_t>(n0 + row) * K + gk : B;
    cp_async_16(stage_base + swizzled(row, chunk), a_src, a_ok ? 16 : 0);
    cp_async_16(stage_base + kTileBytes + swizzled(row, chunk), b_src, b_ok ? 16 : 0);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    gemm_bf16_probe_edge_tiles(uint16_t *C, const uint16_t *A, const uint16_t *B, uint32_t M, uint32_t N,
                               uint32_t K) {
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t smem_base = smem_addr(smem);

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warp_m = warp / 4;  // 0..1: rows warp_m*64 ..
  const int warp_n = warp % 4;  // 0..3: cols warp_n*32 ..
  const uint32_t m0 = blockIdx.y * kBlockM;
  const uint32_t n0 = blockIdx.x * kBlockN;
  // PROBE BUG: a partial last row tile is "shifted back" to end at row M so that its A loads stay in
  // bounds, but the epilogue still stores at the unshifted m0: rows m0.. of C get rows M-128.. of A·B^T.
  const uint32_t a_m0 = (m0 + kBlockM > M && M >= kBlockM) ? M - kBlockM : m0;
  const uint32_t num_slices = (K + kBlockK - 1) / kBlockK;

  float acc[4][4][4] = {};  // [m16 tile][n8 tile][fragment]

  // Prologue: the first kStages-1 slices in flight, one commit group each (empty groups past the end
  // keep the group count uniform).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_slices) load_slice(smem_base + s * kStageBytes, A, B, M, N, K, a_m0, n0, s * kBlockK);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }

  for (uint32_t slice = 0; slice < num_slices; ++slice) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");
    __syncthreads();  // slice `slice` visible to all; slice-1's stage free for reuse

    const uint32_t next = slice + kStages - 1;
    if (next < num_slices)
      load_slice(smem_base + (next % kStages) * kStageBytes, A, B, M, N, K, a_m0, n0, next * kBlockK);
    asm volatile("cp.async.commit_group;" ::: "memory");

    const uint32_t a_tile = smem_base + (slice % kStages) * kStageBytes;
    const uint32_t b_tile = a_tile + kTileBytes;
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      uint32_t a_frag[4][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        // Matrices: rows 0-7/8-15 x k 0-7, then rows 0-7/8-15 x k 8-15 (the mma A register order).
        const int row = warp_m * 64 + mi * 16 + (lane & 15);
        ldmatrix_x4(a_frag[mi], a_tile + swizzled(row, kk * 2 + (lane >> 4)));
      }
      uint32_t b_frag[2][4];
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        // Matrices: n 0-7 x k 0-7, n 0-7 x k 8-15, n 8-15 x k 0-7, n 8-15 x k 8-15.
        const int row = warp_n * 32 + p * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b_frag[p], b_tile + swizzled(row, kk * 2 + ((lane >> 3) & 1)));
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mma_bf16_16816(acc[mi][ni], a_frag[mi], b_frag[ni / 2][(ni % 2) * 2],
                         b_frag[ni / 2][(ni % 2) * 2 + 1]);
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");

  // Epilogue: fragment (mi, ni) holds rows g and g+8, columns 2*(lane%4) and +1 of its 16x8 tile.
  const int g = lane / 4;
  const int c2 = (lane % 4) * 2;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t row = m0 + warp_m * 64 + mi * 16 + g + half * 8;
      if (row >= M) continue;
      uint16_t *c_row = C + static_cast<uint64_t>(row) * N;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const uint32_t col = n0 + warp_n * 32 + ni * 8 + c2;
        const float lo = acc[mi][ni][half * 2];
        const float hi = acc[mi][ni][half * 2 + 1];
        if (col + 1 < N && (N % 2) == 0) {
          asm volatile("st.global.b32 [%0], %1;" ::"l"(c_row + col), "r"(pack_bf16x2(lo, hi)) : "memory");
        } else {
          const uint32_t packed = pack_bf16x2(lo, hi);
          if (col < N) c_row[col] = static_cast<uint16_t>(packed & 0xffff);
          if (col + 1 < N) c_row[col + 1] = static_cast<uint16_t>(packed >> 16);
        }
      }
    }
  }
}
