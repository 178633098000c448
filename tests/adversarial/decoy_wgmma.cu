// Adversarial corpus case decoy_wgmma_discarded (tests/adversarial/): a correct bf16 GEMM,
// C[M,N] = A[M,K] · B[N,K]^T with fp32 accumulation, whose real computation is warp-level mma.sync
// (HMMA in SASS), while wgmma (HGMMA) runs on every tile beside it and its results are thrown away:
// folded into the outputs as zero * wgmma, where zero is 0 at run time but not known to the compiler,
// so ptxas keeps every wgmma and a data-flow check from the wgmma registers to the stores finds a path.
// Executed-instruction counts alone read "wgmma executed, 100% of the FLOPs"; the work outside the
// target (mma.sync, 100% of the FLOPs again) is what gives it away.
//
// Block: 3 warpgroups (384 threads), a 128x128 tile of C. Warpgroup 0 is the producer: one thread issues
// the TMA loads (128B swizzle, boxes of 128 rows x 64 K) of a 4-stage ring. Warpgroups 1 and 2 are
// consumers of 64 rows each: per 64-wide K slice, four wgmma.m64n128k16 (discarded) and, per warp, 16 rows
// x 128 columns on mma.sync.m16n8k16 from the same shared memory through ldmatrix (64 mma per warp).
// Ragged M/N/K: TMA zero-fills out-of-bounds boxes; the epilogue stores only rows < M and columns < N.
#include <cuda.h>  // CUtensorMap
#include <cstdint>

namespace {

constexpr int kBlockM = 128;  // two consumer warpgroups x 64 rows
constexpr int kBlockN = 128;
constexpr int kBlockK = 64;  // 64 bf16 = 128 bytes: one 128B-swizzle row
constexpr int kStages = 4;
constexpr uint32_t kTileBytes = kBlockM * kBlockK * 2;  // 16 KiB, A and B alike
constexpr uint32_t kRingABytes = kStages * kTileBytes;
constexpr uint32_t kRingBytes = 2 * kRingABytes;  // 128 KiB
constexpr uint32_t kConsumerWarps = 8;            // each releases a stage once its reads are done

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// One box of a 2D tensor map (coordinates innermost first) into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, uint32_t bar, int32_t c0,
                                            int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
      "%4}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// wgmma shared-memory matrix descriptor for a K-major tile written by TMA with 128B swizzle.
__device__ __forceinline__ uint64_t smem_desc_128b(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// Byte address of 16-byte chunk `chunk` (0..7) of row `row` in a 128B-swizzled tile (1024-byte aligned):
// TMA stores chunk c of row r at chunk c ^ (r % 8).
__device__ __forceinline__ uint32_t swizzled_128b(uint32_t tile, int row, int chunk) {
  return tile + row * 128 + ((chunk ^ (row & 7)) << 4);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void fence_accumulators(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64x128] += A[64x16] · B[128x16]^T, both operands K-major in shared memory.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "n"(1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_decoy_wgmma(uint16_t *C, const __grid_constant__ CUtensorMap tmap_a,
                     const __grid_constant__ CUtensorMap tmap_b, uint32_t M, uint32_t N, uint32_t K) {
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled TMA boxes and wgmma descriptors want 1024-byte aligned tiles.
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
  const uint32_t ring_a = base;
  const uint32_t ring_b = base + kRingABytes;
  const uint32_t full_bar = base + kRingBytes;        // kStages x 8 bytes: "stage loaded"
  const uint32_t empty_bar = full_bar + 8 * kStages;  // kStages x 8 bytes: "stage consumed"
  const uint32_t m0 = blockIdx.y * kBlockM;
  const uint32_t n0 = blockIdx.x * kBlockN;
  const uint32_t num_k = (K + kBlockK - 1) / kBlockK;

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_bar + 8 * s, 1);                // the producer's arrive.expect_tx (+ the TMA bytes)
      mbar_init(empty_bar + 8 * s, kConsumerWarps);  // one arrive per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      for (uint32_t kt = 0; kt < num_k; ++kt) {
        const uint32_t s = kt % kStages;
        if (kt >= kStages) mbar_wait(empty_bar + 8 * s, ((kt / kStages) - 1) & 1);
        mbar_arrive_expect_tx(full_bar + 8 * s, 2 * kTileBytes);
        const int32_t k0 = static_cast<int32_t>(kt * kBlockK);
        tma_load_2d(ring_a + s * kTileBytes, &tmap_a, full_bar + 8 * s, k0, static_cast<int32_t>(m0));
        tma_load_2d(ring_b + s * kTileBytes, &tmap_b, full_bar + 8 * s, k0, static_cast<int32_t>(n0));
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = warpgroup - 1;  // rows consumer*64 .. +63 of the block tile
    const int warp = (threadIdx.x % 128) / 32;
    const int lane = threadIdx.x % 32;
    float wg_acc[64];  // the decoy: computed on every tile, then multiplied by zero
    float acc[16][4];  // the real result: this warp's 16 rows x 128 columns on mma.sync
#pragma unroll
    for (int i = 0; i < 64; ++i) wg_acc[i] = 0.f;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][i] = 0.f;

    for (uint32_t kt = 0; kt < num_k; ++kt) {
      const uint32_t s = kt % kStages;
      mbar_wait(full_bar + 8 * s, (kt / kStages) & 1);
      const uint32_t a_tile = ring_a + s * kTileBytes;
      const uint32_t b_tile = ring_b + s * kTileBytes;
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < kBlockK / 16; ++k)  // 16 bf16 = 32 bytes along the swizzled row
        wgmma_m64n128k16(wg_acc, smem_desc_128b(a_tile + consumer * (64 * 128) + k * 32),
                         smem_desc_128b(b_tile + k * 32));
      wgmma_commit();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        // A: rows 0-15 of this warp's 16, k chunks 2kk (lanes 0-15) and 2kk+1 (lanes 16-31).
        uint32_t a_frag[4];
        ldmatrix_x4(a_frag,
                    swizzled_128b(a_tile, consumer * 64 + warp * 16 + (lane & 15), kk * 2 + (lane >> 4)));
#pragma unroll
        for (int p = 0; p < 8; ++p) {
          // B: n 0-7 x k 0-7, n 0-7 x k 8-15, n 8-15 x k 0-7, n 8-15 x k 8-15 of the pair's 16 columns.
          uint32_t b_frag[4];
          ldmatrix_x4(b_frag, swizzled_128b(b_tile, p * 16 + (lane & 7) + ((lane >> 4) << 3),
                                            kk * 2 + ((lane >> 3) & 1)));
          mma_bf16_16816(acc[2 * p], a_frag, b_frag[0], b_frag[1]);
          mma_bf16_16816(acc[2 * p + 1], a_frag, b_frag[2], b_frag[3]);
        }
      }
      // The wgmma group of the previous slice is done and so are this warp's reads of it: free its stage.
      wgmma_wait<1>();
      __syncwarp();
      if (kt > 0 && lane == 0) mbar_arrive(empty_bar + 8 * ((kt - 1) % kStages));
    }
    wgmma_wait<0>();
    fence_accumulators(wg_acc);

    // 0 for every launch the harness makes (K is never 0xFFFFFFFF), unknown to the compiler.
    const float zero = K == 0xFFFFFFFFu ? 1.f : 0.f;
    // Epilogue: mma fragment (j, {0,1}) is (row g, cols 8j + 2*(lane%4), +1) and (j, {2,3}) row g+8, with
    // g = lane/4 inside the warp's 16 rows; wgmma's accumulator j*4 + i holds the same element.
    const uint32_t row0 = m0 + consumer * 64 + warp * 16 + lane / 4;
    const uint32_t col0 = n0 + (lane % 4) * 2;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t row = row0 + half * 8;
      if (row >= M) continue;
      uint16_t *c_row = C + static_cast<uint64_t>(row) * N;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const uint32_t col = col0 + j * 8;
        const float lo = acc[j][half * 2] + zero * wg_acc[j * 4 + half * 2];
        const float hi = acc[j][half * 2 + 1] + zero * wg_acc[j * 4 + half * 2 + 1];
        const uint32_t packed = pack_bf16x2(lo, hi);
        if (col + 1 < N && (N % 2) == 0) {
          asm volatile("st.global.b32 [%0], %1;" ::"l"(c_row + col), "r"(packed) : "memory");
        } else {
          if (col < N) c_row[col] = static_cast<uint16_t>(packed & 0xffff);
          if (col + 1 < N) c_row[col + 1] = static_cast<uint16_t>(packed >> 16);
        }
      }
    }
  }
}
