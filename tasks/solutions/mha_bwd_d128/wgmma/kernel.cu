// Reference solution "wgmma": attention backward (dQ, dK, dV) for head dimension 128 the Hopper way
// (FlashAttention-2/3 style matmuls on warpgroup MMAs, operands streamed by TMA), deterministic and with
// no workspace. One launch, two kinds of block chosen by blockIdx.y (even: key block, odd: query block):
//  - key block: 128 keys of one (batch, head) own their rows of dK and dV. K and V stay in shared memory;
//    64-query tiles of Q, dO and O stream through a TMA ring. Per tile and consumer warpgroup (64 keys):
//      Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (wgmma m64n64k16, both operands K-major in shared memory),
//      Pᵀ = exp2(Sᵀ·scale·log2e − LSE·log2e), dSᵀ = Pᵀ∘(dPᵀ − Delta) (per column = per query),
//      dV += Pᵀ·dO and dK += dSᵀ·Q (wgmma m64n128k16 with Pᵀ / dSᵀ as bf16 A fragments from registers and
//      dO / Q as transposed (MN-major) B operands; see "hi + lo" below).
//    Delta = rowsum(dO∘O) and LSE·log2e of the tile are computed by two producer warps from the staged dO
//    and O tiles and handed over in shared memory.
//  - query block: 128 queries own their rows of dQ. Q, dO (and O, for Delta) stay in shared memory;
//    64-key tiles of K and V stream through the ring: S = Q·Kᵀ, dP = dO·Vᵀ, dS = P∘(dP − Delta),
//    dQ += dS·K (K as the transposed B operand).
// Every output element is accumulated by one thread in a fixed order: the result is bit-reproducible.
// hi + lo: P and dS enter the tensor cores as two bf16 terms each, hi = bf16(x) and lo = bf16(x − hi), in
// two wgmmas into the same accumulator, so x is carried to about 2^-17 instead of bf16's 2^-9. With plain
// bf16 P and dS (the usual FlashAttention recipe) this task's spiky inputs and tolerance fail a few
// thousand elements of dQ, dK and dV per launch; the split costs 3 of the 10 matmul passes per tile pair.
// Block: 3 warpgroups. Warpgroup 0 = producer (setmaxnreg.dec): thread 0 issues the TMA loads, warps 2-3
// compute Delta/LSE; warpgroups 1-2 = consumers (setmaxnreg.inc), 64 rows each.
// Tensor maps: Q, K, V, O, dO viewed as [B*H][S][D] (dims D, S, B*H), box 64 x 64 x 1 (64 bf16 = one
// 128-byte swizzle row), 128B swizzle, out-of-bounds rows zero-filled (their LSE is read as +inf, so P = 0).
#include <cuda.h>  // CUtensorMap
#include <cstdint>

#ifndef MHA_CAUSAL
#define MHA_CAUSAL 0  // 1: query i attends keys j <= i
#endif
#ifndef MHA_STAGES
#define MHA_STAGES 2
#endif

namespace {

constexpr int kBlockRows = 128;  // owned rows per block (keys or queries): two consumer warpgroups x 64
constexpr int kTileRows = 64;    // streamed rows per tile (queries or keys)
constexpr int kStages = MHA_STAGES;  // ring depth
constexpr uint32_t kBoxBytes = 64 * 128;                    // 64 rows x 64 bf16: one TMA box, 8 KiB
constexpr uint32_t kSlotBytes = 2 * kBoxBytes;              // 64 rows x 128 bf16: 16 KiB
constexpr uint32_t kResBytes = 2 * kSlotBytes;              // 128 rows x 128 bf16: 32 KiB
constexpr uint32_t kStageBytes = 3 * kSlotBytes;            // Q, dO, O (key block) or K, V (query block)
constexpr uint32_t kResA = 0;                               // K (key block) or Q (query block)
constexpr uint32_t kResB = kResBytes;                       // V (key block) or dO (query block)
constexpr uint32_t kStageOffset = 2 * kResBytes;
constexpr uint32_t kAuxOffset = kStageOffset + kStages * kStageBytes;  // lse2[128], delta[128] floats
constexpr uint32_t kBarOffset = kAuxOffset + 2 * 128 * 4;
constexpr float kLog2e = 1.4426950408889634f;

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

// One 64 x 64 x 1 box (coordinates d, s, b*H+h) into shared memory, completing on bar.
__device__ __forceinline__ void tma_box(uint32_t dst, const CUtensorMap *map, uint32_t bar, int32_t d, int32_t row,
                                        int32_t head) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(d), "r"(row), "r"(head)
      : "memory");
}
// 64 rows x 128 columns as two boxes (columns 0-63, then 64-127 one box further).
__device__ __forceinline__ void tma_slot(uint32_t dst, const CUtensorMap *map, uint32_t bar, int32_t row,
                                         int32_t head) {
  tma_box(dst, map, bar, 0, row, head);
  tma_box(dst + kBoxBytes, map, bar, 64, row, head);
}
// 128 rows x 128 columns: columns 0-63 of all 128 rows (16 KiB), then columns 64-127.
__device__ __forceinline__ void tma_resident(uint32_t dst, const CUtensorMap *map, uint32_t bar, int32_t row,
                                             int32_t head) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int r = 0; r < 2; ++r) tma_box(dst + h * kSlotBytes + r * kBoxBytes, map, bar, 64 * h, row + 64 * r, head);
}

// Shared-memory matrix descriptor, 128B swizzle, 8-row groups 1024 bytes apart (stride byte offset).
// K-major operands: leading byte offset unused (16). MN-major (transposed B) operands: the second 64-column
// half of N lies one box further (leading byte offset = the box's size).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t leading_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(leading_bytes >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads across a wgmma wait (the registers change asynchronously).
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define MHA_ACC32(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define MHA_ACC64(d) \
  MHA_ACC32(d), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define MHA_ACC32_LIST \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MHA_ACC64_LIST \
  MHA_ACC32_LIST ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, " \
  "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

// D[64x64] (+)= A[64x16] · B[64x16]^T, both operands K-major in shared memory; scale_d = 0 overwrites D.
__device__ __forceinline__ void wgmma_ss_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" MHA_ACC32_LIST
      "}, %32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : MHA_ACC32(d)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64x128] += A[64x16] · B[16x128], A (bf16 pairs) from registers, B MN-major in shared memory.
__device__ __forceinline__ void wgmma_rs_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" MHA_ACC64_LIST
      "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : MHA_ACC64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// acc[64x64] = A · Bᵀ over D = 128: 8 k-steps (4 per 64-column box, 32 bytes along the swizzled row).
// a: the warpgroup's 64 rows inside a 128-row resident tile (boxes kSlotBytes apart along D);
// b: a 64-row streamed tile (boxes kBoxBytes apart).
__device__ __forceinline__ void issue_dot(float (&acc)[32], uint32_t a, uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
    wgmma_ss_m64n64k16(acc, smem_desc(a + (kk / 4) * kSlotBytes + (kk % 4) * 32, 16),
                       smem_desc(b + (kk / 4) * kBoxBytes + (kk % 4) * 32, 16), kk > 0);
}

// acc[64x128] += frag[64 x 64] · tile[64 x 128], tile a streamed 64-row tile read as an MN-major B operand
// (16 rows x 128 bytes per k-step).
__device__ __forceinline__ void issue_acc(float (&acc)[64], const uint32_t (&frag)[4][4], uint32_t tile) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_rs_m64n128k16(acc, frag[kk], smem_desc(tile + kk * 2048, kBoxBytes));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}
// hi = bf16x2(lo_val, hi_val) rounded; lo = the rounding remainders, also as bf16x2.
__device__ __forceinline__ void pack_split(float a, float b, uint32_t &hi, uint32_t &lo) {
  hi = pack_bf16x2(a, b);
  lo = pack_bf16x2(a - __uint_as_float(hi << 16), b - __uint_as_float(hi & 0xffff0000u));
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Sum over d of dO[r][d] * O[r][d] for one row of two 128B-swizzled tiles (row r at byte r*128 of each
// 64-column half; the halves are half_bytes apart).
__device__ __forceinline__ float row_dot(uint32_t a, uint32_t b, uint32_t r, uint32_t half_bytes) {
  float acc = 0.f;
#pragma unroll 4
  for (uint32_t c = 0; c < 16; ++c) {
    const uint32_t off = (c / 8) * half_bytes + r * 128 + (((c % 8) ^ (r % 8)) * 16);
    uint32_t x[4], y[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3]) : "r"(a + off));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(y[0]), "=r"(y[1]), "=r"(y[2]), "=r"(y[3]) : "r"(b + off));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = fmaf(__uint_as_float(x[i] << 16), __uint_as_float(y[i] << 16), acc);
      acc = fmaf(__uint_as_float(x[i] & 0xffff0000u), __uint_as_float(y[i] & 0xffff0000u), acc);
    }
  }
  return acc;
}

// Writes a 64 x 128 accumulator (the warpgroup's rows) as bf16 rows of out, times factor; rows >= S skipped.
__device__ __forceinline__ void store_rows(uint16_t *out, const float (&acc)[64], uint32_t row_base, uint32_t S,
                                           uint32_t lane, float factor) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t row = row_base + 8 * h;
    if (row >= S) continue;
    uint16_t *dst = out + static_cast<uint64_t>(row) * 128 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint32_t packed = pack_bf16x2(acc[j * 4 + 2 * h] * factor, acc[j * 4 + 2 * h + 1] * factor);
      asm volatile("st.global.b32 [%0], %1;" ::"l"(dst + 8 * j), "r"(packed) : "memory");
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1)
    mha_bwd_wgmma(const float *LSE, uint16_t *dQ, uint16_t *dK, uint16_t *dV,
                  const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                  const __grid_constant__ CUtensorMap tmap_v, const __grid_constant__ CUtensorMap tmap_o,
                  const __grid_constant__ CUtensorMap tmap_do, uint32_t S, float softmax_scale) {
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled TMA boxes and wgmma descriptors want 1024-byte aligned tiles.
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
  const uint32_t res_a = base + kResA, res_b = base + kResB;
  const uint32_t stages = base + kStageOffset;
  const uint32_t aux = base + kAuxOffset;  // lse2[128] then delta[128]
  float *aux_ptr = reinterpret_cast<float *>(smem_raw + (aux - smem_addr(smem_raw)));
  const uint32_t res_full = base + kBarOffset;
  const uint32_t full = res_full + 8;                // kStages: "tile loaded"
  const uint32_t empty = full + 8 * kStages;         // kStages: "tile consumed"
  const uint32_t aux_full = empty + 8 * kStages;     // kStages: "Delta/LSE of the tile written"

  const bool key_block = (blockIdx.y % 2) == 0;
  const uint32_t head = blockIdx.x;  // b*H + h
  const uint32_t row_blocks = (S + kBlockRows - 1) / kBlockRows;
  // Causal: key blocks with small keys and query blocks with large queries have the most tiles; they go first.
  const uint32_t idx = blockIdx.y / 2;
  const uint32_t own0 = (key_block || !MHA_CAUSAL ? idx : row_blocks - 1 - idx) * kBlockRows;
  // Streamed tiles: key block, queries from tile_begin (causal: only queries >= the first key); query block,
  // keys from 0 (causal: up to the last owned query).
  const uint32_t tile_begin = key_block && MHA_CAUSAL ? own0 : 0;
  const uint32_t tile_end = key_block ? S : (MHA_CAUSAL ? min(S, own0 + kBlockRows) : S);
  const uint32_t num_tiles = (tile_end - tile_begin + kTileRows - 1) / kTileRows;
  const float *lse_head = LSE + static_cast<uint64_t>(head) * S;

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    mbar_init(res_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full + 8 * s, 1);                     // the producer's arrive.expect_tx (+ the TMA bytes)
      mbar_init(empty + 8 * s, key_block ? 2 + 64 : 2);  // consumers (+ the 64 Delta threads, key blocks)
      mbar_init(aux_full + 8 * s, 64);                // the 64 Delta threads
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    const uint32_t ptid = threadIdx.x;
    if (ptid == 0) {
      // ---- TMA producer ----
      const CUtensorMap *res_map_a = key_block ? &tmap_k : &tmap_q;
      const CUtensorMap *res_map_b = key_block ? &tmap_v : &tmap_do;
      const CUtensorMap *map0 = key_block ? &tmap_q : &tmap_k;
      const CUtensorMap *map1 = key_block ? &tmap_do : &tmap_v;
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(res_map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(res_map_b)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map0)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map1)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tmap_o)) : "memory");
      const int32_t h = static_cast<int32_t>(head);
      // Resident: K, V (key block) or Q, dO and O (query block; O goes to the unused third slot of the first
      // two stages, 64 rows each, before any streamed tile).
      mbar_arrive_expect_tx(res_full, key_block ? 2 * kResBytes : 3 * kResBytes);
      tma_resident(res_a, res_map_a, res_full, static_cast<int32_t>(own0), h);
      tma_resident(res_b, res_map_b, res_full, static_cast<int32_t>(own0), h);
      if (!key_block) {
        tma_slot(stages + 2 * kSlotBytes, &tmap_o, res_full, static_cast<int32_t>(own0), h);
        tma_slot(stages + kStageBytes + 2 * kSlotBytes, &tmap_o, res_full, static_cast<int32_t>(own0 + 64), h);
      }
      for (uint32_t t = 0; t < num_tiles; ++t) {
        const uint32_t s = t % kStages;
        const int32_t row = static_cast<int32_t>(tile_begin + t * kTileRows);
        const uint32_t stage = stages + s * kStageBytes;
        if (t >= kStages) mbar_wait(empty + 8 * s, ((t / kStages) - 1) & 1);
        mbar_arrive_expect_tx(full + 8 * s, key_block ? 3 * kSlotBytes : 2 * kSlotBytes);
        tma_slot(stage, map0, full + 8 * s, row, h);
        tma_slot(stage + kSlotBytes, map1, full + 8 * s, row, h);
        if (key_block) tma_slot(stage + 2 * kSlotBytes, &tmap_o, full + 8 * s, row, h);
      }
    } else if (ptid >= 64) {
      // ---- Delta = rowsum(dO∘O) and LSE·log2e, one row per thread ----
      const uint32_t r = ptid - 64;
      if (key_block) {
        for (uint32_t t = 0; t < num_tiles; ++t) {
          const uint32_t s = t % kStages;
          const uint32_t q = tile_begin + t * kTileRows + r;
          const float lse2 = q < S ? lse_head[q] * kLog2e : INFINITY;  // past S: P = 2^-inf = 0
          const uint32_t stage = stages + s * kStageBytes;
          mbar_wait(full + 8 * s, (t / kStages) & 1);
          const float delta = row_dot(stage + kSlotBytes, stage + 2 * kSlotBytes, r, kBoxBytes);
          aux_ptr[s * 128 + r] = lse2;
          aux_ptr[s * 128 + 64 + r] = delta;
          mbar_arrive(aux_full + 8 * s);
          mbar_arrive(empty + 8 * s);
        }
      } else {
        mbar_wait(res_full, 0);
#pragma unroll 1
        for (uint32_t i = 0; i < 2; ++i) {
          const uint32_t rr = r + 64 * i;  // owned query row
          const uint32_t q = own0 + rr;
          const float lse2 = q < S ? lse_head[q] * kLog2e : 0.f;
          // dO row rr in the 128-row resident tile (halves kSlotBytes apart), O row r of stage i's third slot.
          float acc = 0.f;
#pragma unroll 4
          for (uint32_t c = 0; c < 16; ++c) {
            const uint32_t sw = ((c % 8) ^ (rr % 8)) * 16;  // rr % 8 == r % 8
            uint32_t x[4], y[4];
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                         : "r"(res_b + (c / 8) * kSlotBytes + rr * 128 + sw));
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(y[0]), "=r"(y[1]), "=r"(y[2]), "=r"(y[3])
                         : "r"(stages + i * kStageBytes + 2 * kSlotBytes + (c / 8) * kBoxBytes + r * 128 + sw));
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              acc = fmaf(__uint_as_float(x[e] << 16), __uint_as_float(y[e] << 16), acc);
              acc = fmaf(__uint_as_float(x[e] & 0xffff0000u), __uint_as_float(y[e] & 0xffff0000u), acc);
            }
          }
          aux_ptr[rr] = lse2;
          aux_ptr[128 + rr] = acc;
        }
        mbar_arrive(aux_full);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = warpgroup - 1;
    const uint32_t tid = threadIdx.x % 128;
    const uint32_t warp = tid / 32;
    const uint32_t lane = tid % 32;
    // Accumulator layout (m64nN): element j*4 + {0,1} is (row r, columns 8j + 2*(lane%4) + {0,1}),
    // j*4 + {2,3} is (row r+8, same columns), r = 16*warp + lane/4 within the warpgroup's 64 rows.
    const uint32_t row_in_block = consumer * 64 + warp * 16 + lane / 4;
    const uint32_t row_base = own0 + row_in_block;
    const uint32_t my_a = res_a + consumer * 64 * 128;  // the warpgroup's rows of the resident tiles
    const uint32_t my_b = res_b + consumer * 64 * 128;
    const float scale_log2 = softmax_scale * kLog2e;

    mbar_wait(res_full, 0);

    if (key_block) {
      float acc0[64], acc1[64];  // dV, dK
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        acc0[i] = 0.f;
        acc1[i] = 0.f;
      }
      for (uint32_t t = 0; t < num_tiles; ++t) {
        const uint32_t s = t % kStages;
        const uint32_t q0 = tile_begin + t * kTileRows;
        const uint32_t stage = stages + s * kStageBytes;
        float st[32], dpt[32];
        mbar_wait(full + 8 * s, (t / kStages) & 1);
        wgmma_fence();
        issue_dot(st, my_a, stage);  // Sᵀ = K·Qᵀ
        wgmma_commit();
        issue_dot(dpt, my_b, stage + kSlotBytes);  // dPᵀ = V·dOᵀ
        wgmma_commit();
        mbar_wait(aux_full + 8 * s, (t / kStages) & 1);
        const float *lse2 = aux_ptr + s * 128;
        const float *delta = lse2 + 64;
        wgmma_wait<1>();
        fence_regs(st);
        // Pᵀ = 2^(Sᵀ·scale·log2e − LSE·log2e), LSE per column (query); causal: key > query masked, only in
        // tiles that reach below the warpgroup's last key.
        const bool diagonal = MHA_CAUSAL && q0 < own0 + consumer * 64 + 64;
        uint32_t p_hi[4][4], p_lo[4][4], ds_hi[4][4], ds_lo[4][4];
        float pf[32];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float2 l = *reinterpret_cast<const float2 *>(lse2 + 8 * j + 2 * (lane % 4));
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float v = fast_exp2(fmaf(st[j * 4 + e], scale_log2, -((e & 1) ? l.y : l.x)));
            if (diagonal) {
              const uint32_t q = q0 + 8 * j + 2 * (lane % 4) + (e & 1);
              const uint32_t key = row_base + 8 * (e >> 1);
              if (key > q) v = 0.f;
            }
            pf[j * 4 + e] = v;
          }
          pack_split(pf[j * 4 + 0], pf[j * 4 + 1], p_hi[j / 2][(j % 2) * 2 + 0], p_lo[j / 2][(j % 2) * 2 + 0]);
          pack_split(pf[j * 4 + 2], pf[j * 4 + 3], p_hi[j / 2][(j % 2) * 2 + 1], p_lo[j / 2][(j % 2) * 2 + 1]);
        }
        wgmma_wait<0>();
        fence_regs(dpt);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float2 dl = *reinterpret_cast<const float2 *>(delta + 8 * j + 2 * (lane % 4));
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = pf[j * 4 + e] * (dpt[j * 4 + e] - ((e & 1) ? dl.y : dl.x));
          pack_split(v[0], v[1], ds_hi[j / 2][(j % 2) * 2 + 0], ds_lo[j / 2][(j % 2) * 2 + 0]);
          pack_split(v[2], v[3], ds_hi[j / 2][(j % 2) * 2 + 1], ds_lo[j / 2][(j % 2) * 2 + 1]);
        }
        wgmma_fence();
        issue_acc(acc0, p_hi, stage + kSlotBytes);  // dV += Pᵀ·dO
        issue_acc(acc0, p_lo, stage + kSlotBytes);
        issue_acc(acc1, ds_hi, stage);  // dK += dSᵀ·Q
        issue_acc(acc1, ds_lo, stage);
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(acc0);
        fence_regs(acc1);
        if (tid == 0) mbar_arrive(empty + 8 * s);
      }
      const uint64_t head_off = static_cast<uint64_t>(head) * S * 128;
      store_rows(dV + head_off, acc0, row_base, S, lane, 1.f);
      store_rows(dK + head_off, acc1, row_base, S, lane, softmax_scale);
    } else {
      mbar_wait(aux_full, 0);
      float lse2[2], delta[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        lse2[h] = aux_ptr[row_in_block + 8 * h];
        delta[h] = aux_ptr[128 + row_in_block + 8 * h];
      }
      float acc0[64];  // dQ
#pragma unroll
      for (int i = 0; i < 64; ++i) acc0[i] = 0.f;
      for (uint32_t t = 0; t < num_tiles; ++t) {
        const uint32_t s = t % kStages;
        const uint32_t k0 = t * kTileRows;
        const uint32_t stage = stages + s * kStageBytes;
        float sc[32], dp[32];
        mbar_wait(full + 8 * s, (t / kStages) & 1);
        wgmma_fence();
        issue_dot(sc, my_a, stage);  // S = Q·Kᵀ
        wgmma_commit();
        issue_dot(dp, my_b, stage + kSlotBytes);  // dP = dO·Vᵀ
        wgmma_commit();
        wgmma_wait<1>();
        fence_regs(sc);
        // P = 2^(S·scale·log2e − LSE·log2e), LSE per row; causal: key > query masked near the diagonal.
        const bool diagonal = MHA_CAUSAL && k0 + kTileRows > own0 + consumer * 64;
        float pf[32];
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float v = fast_exp2(fmaf(sc[j * 4 + e], scale_log2, -lse2[e >> 1]));
            if (diagonal) {
              const uint32_t key = k0 + 8 * j + 2 * (lane % 4) + (e & 1);
              const uint32_t q = row_base + 8 * (e >> 1);
              if (key > q) v = 0.f;
            }
            pf[j * 4 + e] = v;
          }
        wgmma_wait<0>();
        fence_regs(dp);
        uint32_t ds_hi[4][4], ds_lo[4][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = pf[j * 4 + e] * (dp[j * 4 + e] - delta[e >> 1]);
          pack_split(v[0], v[1], ds_hi[j / 2][(j % 2) * 2 + 0], ds_lo[j / 2][(j % 2) * 2 + 0]);
          pack_split(v[2], v[3], ds_hi[j / 2][(j % 2) * 2 + 1], ds_lo[j / 2][(j % 2) * 2 + 1]);
        }
        wgmma_fence();
        issue_acc(acc0, ds_hi, stage);  // dQ += dS·K
        issue_acc(acc0, ds_lo, stage);
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(acc0);
        if (tid == 0) mbar_arrive(empty + 8 * s);
      }
      wgmma_wait<0>();  // redundant after the loop's own wait (defensive; the build measured on the H200 has it)
      fence_regs(acc0);
      store_rows(dQ + static_cast<uint64_t>(head) * S * 128, acc0, row_base, S, lane, softmax_scale);
    }
  }
}
