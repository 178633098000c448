// Solution "persistent_wgmma_tma": the wgmma_tma kernel (TMA loads into 128B-swizzled shared memory,
// mbarrier ring, wgmma.mma_async m64n256k16) made persistent: the manifest launches one block per SM
// ("grid": "num_sms", the device symbol) and each block loops over output tiles with a grid-stride loop
// (tile = blockIdx.x, blockIdx.x + gridDim.x, ...), in the same grouped raster as wgmma_tma.
//
// Block: 3 warpgroups (384 threads). Warpgroup 0 is the producer: one thread issues the TMA loads of a
// 4-stage ring for every tile of the block in turn (setmaxnreg.dec frees its registers). Warpgroups 1 and
// 2 are consumers, each owning 64 rows of the 128x256 tile (128 fp32 accumulators per thread,
// setmaxnreg.inc). The ring's stage and phase run on across tiles (one K-slice counter for the block), so
// the producer fills the next tile's stages while the consumers run the previous tile's epilogue. A
// consumer releases a stage as soon as the wgmma group that read it has completed, and the last stage of
// a tile after its final wait.
// Ragged M/N/K: TMA zero-fills out-of-bounds boxes; the epilogue stores only rows < M and columns < N.
#include <cuda.h>  // CUtensorMap
#include <cstdint>

namespace {

constexpr int kBlockM = 128;  // two consumer warpgroups x 64 rows
constexpr int kBlockN = 256;  // wgmma N
constexpr int kBlockK = 64;   // 64 bf16 = 128 bytes: one 128B-swizzle row
constexpr int kStages = 4;
constexpr int kGroupM = 8;  // block raster: 8 row tiles share each sweep over N (L2 reuse of B)
constexpr uint32_t kTileABytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr uint32_t kTileBBytes = kBlockN * kBlockK * 2;  // 32 KiB
constexpr uint32_t kRingABytes = kStages * kTileABytes;
constexpr uint32_t kRingBytes = kStages * (kTileABytes + kTileBBytes);  // 192 KiB

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
      "%4}], "
      "[%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// wgmma shared-memory matrix descriptor for a K-major tile written by TMA with 128B swizzle: rows of
// 128 bytes, 8-row groups 1024 bytes apart (stride byte offset), leading byte offset unused (1).
__device__ __forceinline__ uint64_t smem_desc_128b(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
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

// Keeps the compiler from moving accumulator reads across a wgmma wait (the registers change asynchronously).
__device__ __forceinline__ void fence_accumulators(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64x256] += A[64x16] · B[256x16]^T, both operands K-major in shared memory.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "
      "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, "
      "%102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, "
      "%119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),
        "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]),
        "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
        "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
        "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
        "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "n"(1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_bf16_persistent_wgmma_tma(uint16_t *C, const __grid_constant__ CUtensorMap tmap_a,
                                   const __grid_constant__ CUtensorMap tmap_b, uint32_t M, uint32_t N,
                                   uint32_t K) {
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled TMA boxes and wgmma descriptors want 1024-byte aligned tiles.
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
  const uint32_t ring_a = base;
  const uint32_t ring_b = base + kRingABytes;
  const uint32_t full_bar = base + kRingBytes;        // kStages x 8 bytes: "stage loaded"
  const uint32_t empty_bar = full_bar + 8 * kStages;  // kStages x 8 bytes: "stage consumed"

  const uint32_t tiles_n = (N + kBlockN - 1) / kBlockN;
  const uint32_t tiles_m = (M + kBlockM - 1) / kBlockM;
  const uint32_t num_tiles = tiles_n * tiles_m;
  const uint32_t num_k = (K + kBlockK - 1) / kBlockK;

  // Grouped raster of tiles: consecutive tiles walk kGroupM row tiles before moving along N.
  auto tile_origin = [&](uint32_t linear, uint32_t &m0, uint32_t &n0) {
    const uint32_t first_m = (linear / (kGroupM * tiles_n)) * kGroupM;
    const uint32_t group_rows = min(tiles_m - first_m, static_cast<uint32_t>(kGroupM));
    const uint32_t in_group = linear % (kGroupM * tiles_n);
    m0 = (first_m + in_group % group_rows) * kBlockM;
    n0 = (in_group / group_rows) * kBlockN;
  };

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_bar + 8 * s, 1);   // the producer's arrive.expect_tx (+ the TMA bytes)
      mbar_init(empty_bar + 8 * s, 2);  // one arrive per consumer warpgroup
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // Producer warpgroup: registers handed to the consumers; one thread drives the TMA ring.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tmap_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tmap_b)) : "memory");
      uint32_t slice = 0;  // K slices loaded by this block so far, over all its tiles
      for (uint32_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
        uint32_t m0, n0;
        tile_origin(tile, m0, n0);
        for (uint32_t kt = 0; kt < num_k; ++kt, ++slice) {
          const uint32_t s = slice % kStages;
          if (slice >= kStages) mbar_wait(empty_bar + 8 * s, ((slice / kStages) - 1) & 1);
          mbar_arrive_expect_tx(full_bar + 8 * s, kTileABytes + kTileBBytes);
          const int32_t k0 = static_cast<int32_t>(kt * kBlockK);
          tma_load_2d(ring_a + s * kTileABytes, &tmap_a, full_bar + 8 * s, k0, static_cast<int32_t>(m0));
          tma_load_2d(ring_b + s * kTileBBytes, &tmap_b, full_bar + 8 * s, k0, static_cast<int32_t>(n0));
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = warpgroup - 1;  // rows consumer*64 .. +63 of the tile
    const int warp = (threadIdx.x % 128) / 32;
    const int lane = threadIdx.x % 32;
    uint32_t slice = 0;  // K slices consumed by this warpgroup so far, over all its tiles
    for (uint32_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      uint32_t m0, n0;
      tile_origin(tile, m0, n0);
      float acc[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) acc[i] = 0.f;

      for (uint32_t kt = 0; kt < num_k; ++kt, ++slice) {
        const uint32_t s = slice % kStages;
        mbar_wait(full_bar + 8 * s, (slice / kStages) & 1);
        const uint32_t a_tile = ring_a + s * kTileABytes + consumer * (64 * 128);
        const uint32_t b_tile = ring_b + s * kTileBBytes;
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBlockK / 16; ++k)  // 16 bf16 = 32 bytes along the swizzled row
          wgmma_m64n256k16(acc, smem_desc_128b(a_tile + k * 32), smem_desc_128b(b_tile + k * 32));
        wgmma_commit();
        // Keep this slice's group in flight; the previous slice's group is done, so free its stage.
        wgmma_wait<1>();
        if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive(empty_bar + 8 * ((slice - 1) % kStages));
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
      // The tile's last stage is free too: the producer may refill it for the next tile.
      if (num_k > 0 && threadIdx.x % 128 == 0) mbar_arrive(empty_bar + 8 * ((slice - 1) % kStages));

      // Epilogue: accumulator j*4 + {0,1} is (row r, cols c, c+1) and j*4 + {2,3} is (row r+8, same
      // cols), with r = 16*warp + lane/4 and c = 8*j + 2*(lane%4) inside the consumer's 64x256 tile.
      const uint32_t row0 = m0 + consumer * 64 + warp * 16 + lane / 4;
      const uint32_t col0 = n0 + (lane % 4) * 2;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint32_t row = row0 + half * 8;
        if (row >= M) continue;
        uint16_t *c_row = C + static_cast<uint64_t>(row) * N;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const uint32_t col = col0 + j * 8;
          const uint32_t packed = pack_bf16x2(acc[j * 4 + half * 2], acc[j * 4 + half * 2 + 1]);
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
}
